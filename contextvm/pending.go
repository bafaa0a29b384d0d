package contextvm

import (
	"sync"
	"sync/atomic"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// pendingRequest is a request sent to the server and not yet answered.
type pendingRequest struct {
	req   *jsonrpc.Request // as the go-sdk wrote it
	wire  *jsonrpc.Request // as sent: with a progress token the transport added
	token mcpmsg.Token     // progress token, if the request asked for progress

	// Set by the start function of pendingTable.add, under the table's
	// lock, and only read after that.
	timer    *time.Timer // the request timeout
	fallback *time.Timer // what silence sets off (encryption.go), if anything

	// How it went out, set before it is added, for an optional-mode
	// client's change of form (encryption.go).
	wrapped    bool       // its first event was gift-wrapped
	tags       nostr.Tags // the tags of its first event
	switchable bool       // optional mode, one event: it may go again in the other form
	switched   atomic.Bool
	probe      atomic.Int32 // a probeOutcome

	done chan struct{} // closed when it leaves the table

	unheard atomic.Bool // every relay said nobody listens

	busyRetries int // times a busy answer was retried; only the read loop touches it

	paying  atomic.Bool  // a payment for it was asked for (CEP-8): one per request
	resent  atomic.Int32 // times it was sent again after an answer (PaidCall.Resend, RetryLater)
	paidFor atomic.Bool  // and made
	payMu   sync.Mutex
	payment PaymentOffer
	// handed and acceptedEarly, guarded by payMu: the payment is with the
	// wallet, and the server accepted it before the wallet told us it was
	// made (the server may see it settle first).
	handed, acceptedEarly bool

	events []nostr.ID // guarded by the table's lock: the event ids it went out under

	// replicaErr is a replica's error answer (CodeReplicaUnavailable)
	// held while another replica may still answer with what the request
	// did, and replicaTimer the end of that wait; both guarded by the
	// table's lock.
	replicaErr   *jsonrpc.Response
	replicaTimer *time.Timer
}

// injected reports whether the transport added the request's progress
// token: progress on it is the transport's own, not the go-sdk's.
func (p *pendingRequest) injected() bool { return p.wire != p.req }

// pendingTable holds a client's requests in flight, by JSON-RPC id, by the
// ids of the events they went out under (the server's answer names one)
// and by progress token. Taking a request out (remove) is the right to
// answer it: of a response, a timeout and a delivery failure racing for one
// request, exactly one removes it and answers; the others find it gone. The
// zero value is empty and ready to use.
type pendingTable struct {
	mu      sync.Mutex
	byID    map[jsonrpc.ID]*pendingRequest
	byEvent map[nostr.ID]*pendingRequest
	byToken map[mcpmsg.Token][]*pendingRequest // MCP wants tokens unique; a client may still reuse one
}

// add registers p, then calls start, still under the table's lock, to arm
// p's timers: a timer armed there can neither fire before p is registered
// nor be seen unset. A request with p's id is replaced.
func (t *pendingTable) add(p *pendingRequest, start func(*pendingRequest)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID = make(map[jsonrpc.ID]*pendingRequest)
		t.byEvent = make(map[nostr.ID]*pendingRequest)
		t.byToken = make(map[mcpmsg.Token][]*pendingRequest)
	}
	if old := t.byID[p.req.ID]; old != nil {
		t.removeLocked(old)
	}
	if p.done == nil {
		p.done = make(chan struct{})
	}
	t.byID[p.req.ID] = p
	if !p.token.IsZero() {
		t.byToken[p.token] = append(t.byToken[p.token], p)
	}
	if start != nil {
		start(p)
	}
}

// addEvent records that p went out under the event id, so that an answer
// naming it finds p. It reports false if p is no longer pending.
func (t *pendingTable) addEvent(p *pendingRequest, id nostr.ID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[p.req.ID] != p {
		return false
	}
	p.events = append(p.events, id)
	t.byEvent[id] = p
	return true
}

// answered forgets the event id that p went out under, whose answer told
// the client to send p again (a payment to make, a wait, a busy server):
// p is pending under its next event, and any later answer naming this one
// is stale. A replica taking over a lost one can send such an answer, for
// a record the lost replica had not yet removed (docs/replicas.md).
func (t *pendingTable) answered(p *pendingRequest, id nostr.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byEvent[id] == p {
		delete(t.byEvent, id)
	}
}

// holdReplicaError keeps resp, a replica's error answer to p, and calls
// arm, under the table's lock, to time the wait for another answer. It
// reports false, and keeps nothing, when p already holds one (the first
// stands) or is no longer pending.
func (t *pendingTable) holdReplicaError(p *pendingRequest, resp *jsonrpc.Response, arm func() *time.Timer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[p.req.ID] != p || p.replicaErr != nil {
		return false
	}
	p.replicaErr = resp
	p.replicaTimer = arm()
	return true
}

// heldReplicaError is the replica error p holds, if any.
func (t *pendingTable) heldReplicaError(p *pendingRequest) *jsonrpc.Response {
	t.mu.Lock()
	defer t.mu.Unlock()
	return p.replicaErr
}

// isPending reports whether p is still waiting for its answer.
func (t *pendingTable) isPending(p *pendingRequest) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[p.req.ID] == p
}

// forEvent returns the request that went out under the event id.
func (t *pendingTable) forEvent(id nostr.ID) *pendingRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byEvent[id]
}

// withToken returns the requests that asked for progress under tok, oldest
// first. Tokens are compared as JSON values: 1 and "1" differ.
func (t *pendingTable) withToken(tok mcpmsg.Token) []*pendingRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*pendingRequest(nil), t.byToken[tok]...)
}

// injected reports whether tok is a token the transport added to one of
// its requests in flight.
func (t *pendingTable) injected(tok mcpmsg.Token) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byToken[tok] {
		if p.injected() {
			return true
		}
	}
	return false
}

// keepAlive restarts, with d, the timeout of every request that asked for
// progress under tok, and stops what its silence would set off.
func (t *pendingTable) keepAlive(tok mcpmsg.Token, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byToken[tok] {
		if p.timer != nil {
			p.timer.Reset(d)
		}
		if p.fallback != nil {
			p.fallback.Stop() // the server has it: not silent
		}
	}
}

// restart restarts p's timeout with d.
func (t *pendingTable) restart(p *pendingRequest, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[p.req.ID] == p && p.timer != nil {
		p.timer.Reset(d)
	}
}

func (p *pendingRequest) setOffer(o PaymentOffer) {
	p.payMu.Lock()
	defer p.payMu.Unlock()
	p.payment = o
}

func (p *pendingRequest) offer() PaymentOffer {
	p.payMu.Lock()
	defer p.payMu.Unlock()
	return p.payment
}

// remove takes p out of the table and stops its timers. It reports false if
// p was no longer there: someone else answered it.
func (t *pendingTable) remove(p *pendingRequest) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[p.req.ID] != p {
		return false
	}
	t.removeLocked(p)
	return true
}

func (t *pendingTable) removeLocked(p *pendingRequest) {
	delete(t.byID, p.req.ID)
	close(p.done)
	for _, id := range p.events {
		delete(t.byEvent, id)
	}
	if !p.token.IsZero() {
		ps := t.byToken[p.token]
		for i, q := range ps {
			if q == p {
				ps = append(ps[:i:i], ps[i+1:]...)
				break
			}
		}
		if len(ps) == 0 {
			delete(t.byToken, p.token)
		} else {
			t.byToken[p.token] = ps
		}
	}
	stopTimers(p)
}

// stopAll stops the timers of every request, which stay in the table: the
// connection is closing, and the go-sdk fails what it has in flight.
func (t *pendingTable) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byID {
		stopTimers(p)
	}
}

// len is the number of requests in flight.
func (t *pendingTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

func stopTimers(p *pendingRequest) {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.fallback != nil {
		p.fallback.Stop()
	}
	if p.replicaTimer != nil {
		p.replicaTimer.Stop()
	}
}
