package mcpmux

import (
	"strconv"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// call is a request sent upstream and not yet answered.
type call struct {
	s       *Session // nil for the mux's own requests
	origID  jsonrpc.ID
	upID    jsonrpc.ID
	seq     int64 // order of sending, for RouteNewest
	method  string
	uri     string // for resources/subscribe and unsubscribe
	gen     uint64 // the upstream connection it went to
	start   time.Time
	token   mcpmsg.Token // the caller's progress token, zero if none
	upToken mcpmsg.Token // the token the upstream knows
}

// calls are the requests in flight upstream, by the id and the progress
// token the upstream knows them by. Its methods are safe for concurrent
// use.
type calls struct {
	mu      sync.Mutex
	byID    map[jsonrpc.ID]*call
	byToken map[mcpmsg.Token]*call
	next    int64
}

func newCalls() *calls {
	return &calls{byID: make(map[jsonrpc.ID]*call), byToken: make(map[mcpmsg.Token]*call)}
}

// add gives c an upstream id, and an upstream token if it carries one of
// its caller's, and records it.
func (t *calls) add(c *call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	c.seq = t.next
	c.upID = mcpmsg.IntID(t.next)
	if !c.token.IsZero() {
		c.upToken = mcpmsg.StringToken("cvm-" + strconv.FormatInt(t.next, 10))
		t.byToken[c.upToken] = c
	}
	t.byID[c.upID] = c
	if c.s != nil {
		c.s.inflight.Add(1)
	}
}

// settle ends c's count among its caller's requests in flight. A call
// taken from the books (take, takeOf, takeAll) is settled once its answer
// has been handed to the caller, or at once when none is owed: a caller
// that InFlight calls idle has no answer on its way.
func (c *call) settle() {
	if c.s != nil {
		c.s.inflight.Add(-1)
	}
}

// take removes the call the upstream knows as id; the caller settles it.
func (t *calls) take(id jsonrpc.ID) (*call, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.byID[id]
	if ok {
		t.dropLocked(c)
	}
	return c, ok
}

func (t *calls) dropLocked(c *call) {
	delete(t.byID, c.upID)
	if !c.upToken.IsZero() {
		delete(t.byToken, c.upToken)
	}
}

// len is the number of calls in flight. A token left without its call
// counts too, so that a leak shows.
func (t *calls) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.byID)
	for _, c := range t.byToken {
		if t.byID[c.upID] != c {
			n++
		}
	}
	return n
}

// byUpToken finds the call that asked for progress under tok.
func (t *calls) byUpToken(tok mcpmsg.Token) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byToken[tok]
}

// takeOf removes the call of s that s knows as origID.
func (t *calls) takeOf(s *Session, origID jsonrpc.ID) (*call, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.byID {
		if c.s == s && c.origID == origID {
			t.dropLocked(c)
			return c, true
		}
	}
	return nil, false
}

// takeAll removes and returns every call for which match is true.
func (t *calls) takeAll(match func(*call) bool) []*call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*call
	for _, c := range t.byID {
		if match(c) {
			t.dropLocked(c)
			out = append(out, c)
		}
	}
	return out
}

// each calls f for every call of a caller, under the table's lock.
func (t *calls) each(f func(*call)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.byID {
		if c.s != nil {
			f(c)
		}
	}
}

// routed are the upstream's requests handed to callers and not yet
// answered: the caller each went to, and on which upstream connection it
// arrived. Its methods are safe for concurrent use.
type routed struct {
	mu sync.Mutex
	m  map[jsonrpc.ID]route
}

type route struct {
	s   *Session
	gen uint64
}

func newRouted() *routed { return &routed{m: make(map[jsonrpc.ID]route)} }

func (r *routed) add(id jsonrpc.ID, to route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[id] = to
}

// take removes the request id; with s set, only if it went to s.
func (r *routed) take(id jsonrpc.ID, s *Session) (route, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	to, ok := r.m[id]
	if !ok || (s != nil && to.s != s) {
		return route{}, false
	}
	delete(r.m, id)
	return to, true
}

// takeAll removes every request that went to s, or every one with s nil.
func (r *routed) takeAll(s *Session) map[jsonrpc.ID]route {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[jsonrpc.ID]route)
	for id, to := range r.m {
		if s == nil || to.s == s {
			out[id] = to
			delete(r.m, id)
		}
	}
	return out
}

// subscriptions count the callers subscribed to each resource. Its methods
// are safe for concurrent use.
type subscriptions struct {
	mu sync.Mutex
	m  map[string]map[*Session]bool
}

func newSubscriptions() *subscriptions {
	return &subscriptions{m: make(map[string]map[*Session]bool)}
}

// add records that s subscribed to uri, and reports whether it is the
// first subscriber: the one whose subscription the upstream must hear.
func (t *subscriptions) add(s *Session, uri string) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := t.m[uri]
	if subs == nil {
		subs = make(map[*Session]bool)
		t.m[uri] = subs
	}
	first = len(subs) == 0
	subs[s] = true
	return first
}

// remove records that s unsubscribed from uri, and reports whether s was
// the last subscriber, so that the upstream must hear of it.
func (t *subscriptions) remove(s *Session, uri string) (last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := t.m[uri]
	if !subs[s] {
		return false
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(t.m, uri)
		return true
	}
	return false
}

// drop removes every subscription of s and returns the resources nobody
// watches any more.
func (t *subscriptions) drop(s *Session) (unwatched []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uri, subs := range t.m {
		if subs[s] {
			delete(subs, s)
			if len(subs) == 0 {
				delete(t.m, uri)
				unwatched = append(unwatched, uri)
			}
		}
	}
	return unwatched
}

// subscribers returns the callers subscribed to uri.
func (t *subscriptions) subscribers(uri string) []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Session, 0, len(t.m[uri]))
	for s := range t.m[uri] {
		out = append(out, s)
	}
	return out
}

// uris returns every resource somebody watches.
func (t *subscriptions) uris() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.m))
	for uri := range t.m {
		out = append(out, uri)
	}
	return out
}
