package contextvm

import "sync"

// registry is a map with its own lock, for the small tables a connection
// keeps beside its bigger owners: the server requests a client owes an
// answer (by JSON-RPC id), the transfers waiting for an accept and the open
// streams (by progress token), the requests a server sent its clients (by
// event id). Its zero value is empty and ready to use. Values are compared
// only by deleteIf, which is why they are comparable.
type registry[K, V comparable] struct {
	mu sync.Mutex
	m  map[K]V
}

// put maps k to v, replacing what k mapped to.
func (r *registry[K, V]) put(k K, v V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[K]V)
	}
	r.m[k] = v
}

// get returns what k maps to.
func (r *registry[K, V]) get(k K) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	return v, ok
}

// take removes k and returns what it mapped to: of two callers taking the
// same key, one gets it.
func (r *registry[K, V]) take(k K) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	delete(r.m, k)
	return v, ok
}

// deleteIf removes k if it still maps to v, and not to what replaced v.
func (r *registry[K, V]) deleteIf(k K, v V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.m[k]; ok && cur == v {
		delete(r.m, k)
	}
}

// deleteFunc removes every entry for which drop reports true.
func (r *registry[K, V]) deleteFunc(drop func(K, V) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.m {
		if drop(k, v) {
			delete(r.m, k)
		}
	}
}

// drain removes every entry and returns the values.
func (r *registry[K, V]) drain() []V {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]V, 0, len(r.m))
	for _, v := range r.m {
		out = append(out, v)
	}
	clear(r.m)
	return out
}

// len is the number of entries.
func (r *registry[K, V]) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
