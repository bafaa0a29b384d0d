package participant

import (
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// pendingTable is the requests this participant sent and that are not yet
// answered, by the id of the envelope that carried each (responses
// correlate by it) and by the progress token put on it. It has its own
// lock, so that answers, progress and timeouts never wait on the client's.
// Its methods are safe for concurrent use; a request leaves the table
// exactly once, and only the caller that took it out completes it.
type pendingTable struct {
	timeout time.Duration // each request's (restarted by its progress); <= 0: none

	mu      sync.Mutex
	byEnv   map[string]*pending
	byToken map[mcpmsg.Token]*pending
	wire    int64 // the last JSON-RPC id handed out
	closed  bool
}

func newPendingTable(timeout time.Duration) *pendingTable {
	return &pendingTable{timeout: timeout, byEnv: make(map[string]*pending), byToken: make(map[mcpmsg.Token]*pending)}
}

// nextWireID is a JSON-RPC id unique within this client.
func (t *pendingTable) nextWireID() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.wire++
	return t.wire
}

// add tracks p, starting its timeout, which calls expire. After close it
// refuses.
func (t *pendingTable) add(p *pending, expire func(*pending)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errConnClosed
	}
	t.byEnv[p.envID] = p
	if !p.token.IsZero() {
		t.byToken[p.token] = p
	}
	if t.timeout > 0 {
		p.timer = time.AfterFunc(t.timeout, func() { expire(p) })
	}
	return nil
}

// forget takes p out; false if it was out already (answered, expired,
// failed), in which case nobody may complete it again.
func (t *pendingTable) forget(p *pending) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.forgetLocked(p)
}

func (t *pendingTable) forgetLocked(p *pending) bool {
	if t.byEnv[p.envID] != p {
		return false
	}
	delete(t.byEnv, p.envID)
	if !p.token.IsZero() {
		delete(t.byToken, p.token)
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	return true
}

// takeAnswered takes out the request the envelope envID answers, if it was
// sent to from.
func (t *pendingTable) takeAnswered(envID, from string) (*pending, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byEnv[envID]
	if p == nil || p.peer != from || !t.forgetLocked(p) {
		return nil, false
	}
	return p, true
}

// takeEnvelope takes out the request sent in envelope envID.
func (t *pendingTable) takeEnvelope(envID string) (*pending, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byEnv[envID]
	return p, p != nil && t.forgetLocked(p)
}

// sentIn returns the request sent in envelope envID, leaving it in.
func (t *pendingTable) sentIn(envID string) *pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byEnv[envID]
}

// progressed returns the request of from that asked for progress under
// tok, and restarts its timeout.
func (t *pendingTable) progressed(tok mcpmsg.Token, from string) (*pending, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byToken[tok]
	if p == nil || p.peer != from {
		return nil, false
	}
	if p.timer != nil {
		p.timer.Reset(t.timeout)
	}
	return p, true
}

// takeOf takes out the request s knows as origID.
func (t *pendingTable) takeOf(s sink, origID jsonrpc.ID) (*pending, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byEnv {
		if p.sink == s && p.origID == origID {
			return p, t.forgetLocked(p)
		}
	}
	return nil, false
}

// takeAll takes out every request for which match is true, for the caller
// to fail.
func (t *pendingTable) takeAll(match func(*pending) bool) []*pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*pending
	for _, p := range t.byEnv {
		if match(p) && t.forgetLocked(p) {
			out = append(out, p)
		}
	}
	return out
}

// close takes out everything and refuses later requests.
func (t *pendingTable) close() []*pending {
	all := t.takeAll(func(*pending) bool { return true })
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return all
}

// has reports whether a request with method is in flight.
func (t *pendingTable) has(method string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byEnv {
		if p.method == method {
			return true
		}
	}
	return false
}
