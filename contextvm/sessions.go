package contextvm

import (
	"container/list"
	"errors"
	"iter"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/admission"
)

// sessionTable is a server's book of client sessions, under a lock of its
// own: the current session of each client, those same sessions in an LRU
// (most recently active first) admitted by policy (admission.Admit), and
// every session not yet closed, retired ones (replaced or evicted, still
// answering what they have in flight) included, so that the server's
// Close can reach them all.
//
// Lock order: the table's lock may be held while taking a session's lock
// (idle and start read each session's activity), never the reverse.
type sessionTable struct {
	policy admission.Policy
	known  func(client nostr.PubKey) bool // on the allow-list

	mu      sync.Mutex
	current map[nostr.PubKey]*ServerConn
	lru     *list.List // of *ServerConn; each session's elem points into it
	unknown int        // current sessions of clients not on the allow-list
	live    map[*ServerConn]struct{}
	nextID  uint64
}

func newSessionTable(policy admission.Policy, known func(nostr.PubKey) bool) *sessionTable {
	return &sessionTable{
		policy:  policy,
		known:   known,
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

// Why start made no session: no session may give way, in the whole table
// or in the share of it open to clients outside the allow-list.
var (
	errNoSession    = errors.New("every session is busy or was active within the grace period")
	errStrangerFull = errors.New("every session open to clients outside the allow-list is busy or was active within the grace period")
)

// start makes the client's new current session with newConn, which gets a
// number unique in the table and is called under its lock, and returns it
// with the sessions it retires: the client's previous one, or, for a
// client without one, the one admission.Admit picks to give way. When it
// may pick none, start makes nothing and returns errNoSession (or
// errStrangerFull, for a client outside the allow-list refused only for
// its kind's share) and when to try again.
func (t *sessionTable) start(client nostr.PubKey, now time.Time, newConn func(n uint64) *ServerConn) (c *ServerConn, retired []*ServerConn, retryAfter time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.current[client]; old != nil {
		t.dropLocked(old)
		retired = append(retired, old)
	} else {
		known := t.known(client)
		held := admission.Held{Sessions: t.lru.Len(), Unknown: t.unknown}
		d := admission.Admit(now, t.policy, known, held, t.oldestFirst(), t.state)
		if !d.Admit {
			if !known && t.policy.Reserve > 0 && held.Sessions < t.policy.Max {
				return nil, nil, d.RetryAfter, errStrangerFull
			}
			return nil, nil, d.RetryAfter, errNoSession
		}
		if d.Evict {
			t.dropLocked(d.Victim)
			retired = append(retired, d.Victim)
		}
	}
	t.nextID++
	c = newConn(t.nextID)
	t.current[client] = c
	c.elem = t.lru.PushFront(c)
	if !t.known(client) {
		t.unknown++
	}
	t.live[c] = struct{}{}
	return c, retired, 0, nil
}

// dropLocked takes c, a current session, out of service (it stays live
// until it closes); the caller holds the lock.
func (t *sessionTable) dropLocked(c *ServerConn) {
	delete(t.current, c.client)
	t.lru.Remove(c.elem)
	if !t.known(c.client) {
		t.unknown--
	}
}

// oldestFirst yields the current sessions, least recently active first;
// the caller holds the lock.
func (t *sessionTable) oldestFirst() iter.Seq[*ServerConn] {
	return func(yield func(*ServerConn) bool) {
		for e := t.lru.Back(); e != nil; e = e.Prev() {
			if !yield(e.Value.(*ServerConn)) {
				return
			}
		}
	}
}

func (t *sessionTable) state(c *ServerConn) admission.State {
	return admission.State{LastActive: c.lastActive(), Busy: c.inFlight() > 0, Known: t.known(c.client)}
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
		t.dropLocked(c)
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
