package durable

import (
	"context"
	"sync"
	"time"
)

// record is one record in memory.
type record struct {
	value   []byte
	expires time.Time
}

// table is the records of a store, by space and key: the whole state of
// Memory, and the index of a file store. Not safe for concurrent use; its
// owner locks.
type table struct {
	max    int
	now    func() time.Time
	spaces map[string]map[string]record
	n      int // records, expired ones included until swept
}

func newTable(max int, now func() time.Time) *table {
	return &table{max: max, now: now, spaces: make(map[string]map[string]record)}
}

func (t *table) get(space, key string) (record, bool) {
	r, ok := t.spaces[space][key]
	if !ok || !r.expires.After(t.now()) {
		return record{}, false
	}
	return r, true
}

// room makes room for one more record, sweeping expired ones when the table
// is at its bound; false if it is full of live records.
func (t *table) room() bool {
	if t.n < t.max {
		return true
	}
	t.sweep()
	return t.n < t.max
}

func (t *table) set(space, key string, r record) {
	m := t.spaces[space]
	if m == nil {
		m = make(map[string]record)
		t.spaces[space] = m
	}
	if _, ok := m[key]; !ok {
		t.n++
	}
	m[key] = r
}

// sweep forgets expired records and returns them, by space.
func (t *table) sweep() map[string][]string {
	now := t.now()
	gone := map[string][]string{}
	for space, m := range t.spaces {
		for key, r := range m {
			if !r.expires.After(now) {
				delete(m, key)
				t.n--
				gone[space] = append(gone[space], key)
			}
		}
	}
	return gone
}

// Memory is a Store in the process's memory: what it holds dies with the
// process. For cvm demo, which writes nothing to disk, and for tests.
type Memory struct {
	mu     sync.Mutex
	t      *table
	closed bool
}

// NewMemory returns an empty Memory store.
func NewMemory(opts Options) *Memory {
	opts = opts.withDefaults()
	return &Memory{t: newTable(opts.MaxRecords, opts.Now)}
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, space string, key []byte, expires time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	if _, ok := m.t.get(space, string(key)); ok {
		return false, nil
	}
	if !m.t.room() {
		return false, ErrFull
	}
	m.t.set(space, string(key), record{expires: expires})
	return true, nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, space string, key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false, ErrClosed
	}
	r, ok := m.t.get(space, string(key))
	return r.value, ok, nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, space string, key, value []byte, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.t.get(space, string(key)); !ok && !m.t.room() {
		return ErrFull
	}
	m.t.set(space, string(key), record{value: append([]byte(nil), value...), expires: expires})
	return nil
}

// Swap implements Swapper.
func (m *Memory) Swap(_ context.Context, space string, key, old, value []byte, expires time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	r, ok := m.t.get(space, string(key))
	if !holds(r.value, ok, old) {
		return false, nil
	}
	if !ok && !m.t.room() {
		return false, ErrFull
	}
	m.t.set(space, string(key), record{value: append([]byte(nil), value...), expires: expires})
	return true, nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
