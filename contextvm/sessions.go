package contextvm

import (
	"container/list"
	"sync"
	"time"

	"fiatjaf.com/nostr"
)

// sessionTable is a server's book of client sessions, under a lock of its
// own: the current session of each client, those same sessions in an LRU
// (most recently active first) bounded by max, and every session not yet
// closed, retired ones (replaced or evicted, still answering what they have
// in flight) included, so that the server's Close can reach them all.
//
// Lock order: the table's lock may be held while taking a session's lock
// (idle reads each session's activity), never the reverse.
type sessionTable struct {
	max int

	mu      sync.Mutex
	current map[nostr.PubKey]*ServerConn
	lru     *list.List // of *ServerConn; each session's elem points into it
	live    map[*ServerConn]struct{}
	nextID  uint64
}

func newSessionTable(max int) *sessionTable {
	return &sessionTable{
		max:     max,
		current: make(map[nostr.PubKey]*ServerConn),
		lru:     list.New(),
		live:    make(map[*ServerConn]struct{}),
	}
}

// get returns the client's current session, or nil.
func (t *sessionTable) get(client nostr.PubKey) *ServerConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current[client]
}

// start makes the client's new current session with newConn, which gets a
// number unique in the table and is called under its lock, and returns it
// with the sessions it retires: the client's previous one, and the least
// recently active ones beyond max.
func (t *sessionTable) start(client nostr.PubKey, newConn func(n uint64) *ServerConn) (c *ServerConn, retired []*ServerConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	c = newConn(t.nextID)
	if old := t.current[client]; old != nil {
		retired = append(retired, old)
		t.lru.Remove(old.elem)
	}
	t.current[client] = c
	c.elem = t.lru.PushFront(c)
	t.live[c] = struct{}{}
	for t.lru.Len() > t.max {
		victim := t.lru.Back().Value.(*ServerConn)
		t.lru.Remove(victim.elem)
		delete(t.current, victim.client)
		retired = append(retired, victim)
	}
	return c, retired
}

// touch marks c as the most recently active session, if it is current.
func (t *sessionTable) touch(c *ServerConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current[c.client] == c {
		t.lru.MoveToFront(c.elem)
	}
}

// remove takes a closing session out of the books.
func (t *sessionTable) remove(c *ServerConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current[c.client] == c {
		delete(t.current, c.client)
		t.lru.Remove(c.elem)
	}
	delete(t.live, c)
}

// idle returns the current sessions with nothing in flight that have been
// inactive for timeout by now.
func (t *sessionTable) idle(now time.Time, timeout time.Duration) []*ServerConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var idle []*ServerConn
	for e := t.lru.Back(); e != nil; e = e.Prev() {
		c := e.Value.(*ServerConn)
		if now.Sub(c.lastActive()) < timeout {
			break // the rest are more recent
		}
		if c.inFlight() == 0 {
			idle = append(idle, c)
		}
	}
	return idle
}

// all returns every session not yet closed.
func (t *sessionTable) all() []*ServerConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*ServerConn, 0, len(t.live))
	for c := range t.live {
		out = append(out, c)
	}
	return out
}

// len is the number of current sessions (retired ones not counted).
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.current)
}
