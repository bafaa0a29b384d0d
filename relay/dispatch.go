package relay

import (
	"sync"

	"fiatjaf.com/nostr"
)

// listener is one live filter of one subscription of one connection.
type listener struct {
	conn   *conn
	sub    string
	filter nostr.Filter
	prefix []byte // `["EVENT","<sub>",`: the frame is prefix + event + "]"
}

// dispatcher indexes live filters so that an event reaches its subscribers
// without a scan of every filter. A filter is indexed under the most
// selective field it has: its "#p" values (every ContextVM subscription has
// one), else its authors, else its kinds; filters with none of them are kept
// apart and checked for every event.
//
// khatru's own dispatcher mutates its index sets in place while broadcasts
// read them without a lock; a subscription closing during a broadcast can
// make the broadcast skip an unrelated subscriber. Here every change and
// every lookup holds the lock, and lookups copy what they found before any
// frame is written.
type dispatcher struct {
	mu       sync.RWMutex
	byP      map[string]map[*listener]struct{}
	byAuthor map[nostr.PubKey]map[*listener]struct{}
	byKind   map[nostr.Kind]map[*listener]struct{}
	rest     map[*listener]struct{}
	count    int
}

func newDispatcher() *dispatcher {
	return &dispatcher{
		byP:      make(map[string]map[*listener]struct{}),
		byAuthor: make(map[nostr.PubKey]map[*listener]struct{}),
		byKind:   make(map[nostr.Kind]map[*listener]struct{}),
		rest:     make(map[*listener]struct{}),
	}
}

func addTo[K comparable](m map[K]map[*listener]struct{}, k K, l *listener) {
	set := m[k]
	if set == nil {
		set = make(map[*listener]struct{})
		m[k] = set
	}
	set[l] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[*listener]struct{}, k K, l *listener) {
	if set := m[k]; set != nil {
		delete(set, l)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

func (d *dispatcher) add(l *listener) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count++
	switch f := l.filter; {
	case len(f.Tags["p"]) > 0:
		for _, p := range f.Tags["p"] {
			addTo(d.byP, p, l)
		}
	case len(f.Authors) > 0:
		for _, a := range f.Authors {
			addTo(d.byAuthor, a, l)
		}
	case len(f.Kinds) > 0:
		for _, k := range f.Kinds {
			addTo(d.byKind, k, l)
		}
	default:
		d.rest[l] = struct{}{}
	}
}

func (d *dispatcher) remove(l *listener) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count--
	switch f := l.filter; {
	case len(f.Tags["p"]) > 0:
		for _, p := range f.Tags["p"] {
			removeFrom(d.byP, p, l)
		}
	case len(f.Authors) > 0:
		for _, a := range f.Authors {
			removeFrom(d.byAuthor, a, l)
		}
	case len(f.Kinds) > 0:
		for _, k := range f.Kinds {
			removeFrom(d.byKind, k, l)
		}
	default:
		delete(d.rest, l)
	}
}

// match returns the listeners whose filters evt matches, each once.
func (d *dispatcher) match(evt nostr.Event) []*listener {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []*listener
	var seen map[*listener]struct{} // only needed when an event can reach a listener twice
	consider := func(set map[*listener]struct{}) {
		for l := range set {
			if seen != nil {
				if _, dup := seen[l]; dup {
					continue
				}
				seen[l] = struct{}{}
			}
			if l.filter.Matches(evt) {
				out = append(out, l)
			}
		}
	}
	pTags := 0
	for _, t := range evt.Tags {
		if len(t) >= 2 && t[0] == "p" {
			pTags++
		}
	}
	if pTags > 1 {
		seen = make(map[*listener]struct{})
	}
	for _, t := range evt.Tags {
		if len(t) >= 2 && t[0] == "p" {
			consider(d.byP[t[1]])
		}
	}
	consider(d.byAuthor[evt.PubKey])
	consider(d.byKind[evt.Kind])
	consider(d.rest)
	return out
}

func (d *dispatcher) size() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.count
}
