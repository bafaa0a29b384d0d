package mcpmux

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Caller is one client of the shared session, as the mux reaches it.
//
// Send delivers a message to the caller: an answer to its request, a
// notification, or a request of the upstream's. For such a request, related
// is the caller's own request that caused it, when the mux knows (else an
// invalid ID), for transports that can say so (MCPx correlates them). Send
// may be called concurrently, from the mux's reader and from the caller's
// own Handle; messages of one goroutine arrive in order. It should not
// block for long: the upstream's reader waits for it. An error means the
// message did not reach the caller: a request of the upstream's is then
// answered with that error at once, anything else is dropped with a log
// line.
type Caller interface {
	Send(msg jsonrpc.Message, related jsonrpc.ID) error
}

// CallerFunc adapts a function to Caller.
type CallerFunc func(msg jsonrpc.Message, related jsonrpc.ID) error

// Send calls f.
func (f CallerFunc) Send(msg jsonrpc.Message, related jsonrpc.ID) error { return f(msg, related) }

// Session is one caller's session with the Mux, from Join to Leave.
type Session struct {
	m        *Mux
	caller   Caller
	inflight atomic.Int64 // its requests in flight upstream

	mu          sync.Mutex
	initialized bool
	caps        capabilities

	// sending is held (shared) while a message is handed to the caller,
	// and taken by Leave, so that nothing reaches the caller after Leave.
	sending sync.RWMutex
	left    bool // guarded by sending
}

// capabilities are those a caller declared, which decide whether a request
// of the upstream's may go to it.
type capabilities struct {
	Sampling    json.RawMessage `json:"sampling"`
	Elicitation json.RawMessage `json:"elicitation"`
}

// Join adds a caller. Its first request should be initialize, which the mux
// answers with the upstream's own initialize result.
func (m *Mux) Join(c Caller) *Session {
	s := &Session{m: m, caller: c}
	m.mu.Lock()
	m.sessions[s] = true
	m.mu.Unlock()
	return s
}

// InFlight is the number of the caller's requests whose answers have not
// reached it: the upstream has not answered them, or the answer is being
// handed to the caller's Send.
func (s *Session) InFlight() int { return int(s.inflight.Load()) }

func (s *Session) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// declares reports whether the caller declared the capability a request
// with method needs.
func (s *Session) declares(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case mcpmsg.MethodCreateMessage:
		return !mcpmsg.IsNull(s.caps.Sampling)
	case mcpmsg.MethodElicit:
		return !mcpmsg.IsNull(s.caps.Elicitation)
	}
	return true
}

// errLeft is what sending to a caller that has left reports.
var errLeft = errors.New("mcpmux: the caller has left")

func (s *Session) send(msg jsonrpc.Message, related jsonrpc.ID) error {
	s.sending.RLock()
	defer s.sending.RUnlock()
	if s.left {
		return errLeft
	}
	err := s.caller.Send(msg, related)
	if err != nil {
		s.m.log.Debug("message not delivered to the caller", "err", err)
	}
	return err
}

func (s *Session) hasLeft() bool {
	s.sending.RLock()
	defer s.sending.RUnlock()
	return s.left
}

// Handle takes one message from the caller: a request, a notification, or
// an answer to a request of the upstream's. Whatever it must answer, it
// answers through the caller's Send, never by an error: one failed request
// must not end the caller's session.
func (s *Session) Handle(msg jsonrpc.Message) {
	if s.hasLeft() {
		return
	}
	switch r := msg.(type) {
	case *jsonrpc.Response:
		to, ok := s.m.routed.take(r.ID, s)
		if !ok {
			s.m.log.Debug("dropping an answer to no request routed to this caller", "id", r.ID.Raw())
			return
		}
		if err := s.m.link.Write(to.gen, r); err != nil {
			s.m.log.Debug("answer not delivered upstream", "err", err)
		}
	case *jsonrpc.Request:
		if r.IsCall() {
			s.request(r)
		} else {
			s.notification(r)
		}
	}
}

func (s *Session) request(r *jsonrpc.Request) {
	m := s.m
	start := time.Now()
	switch r.Method {
	case mcpmsg.MethodInitialize:
		var p struct {
			Capabilities capabilities `json:"capabilities"`
		}
		json.Unmarshal(r.Params, &p)
		s.mu.Lock()
		s.initialized, s.caps = true, p.Capabilities
		s.mu.Unlock()
		m.opts.Events.Answered(r.Method, start, OutcomeOK)
		s.send(mcpmsg.Result(r.ID, m.initializeResult()), jsonrpc.ID{})
		return
	case mcpmsg.MethodPing:
		s.send(mcpmsg.EmptyResult(r.ID), jsonrpc.ID{})
		return
	}
	if !s.isInitialized() {
		s.send(mcpmsg.ErrorResponse(r.ID, jsonrpc.CodeInvalidRequest, "%s before initialize: send initialize first", r.Method), jsonrpc.ID{})
		return
	}
	c := &call{s: s, origID: r.ID, method: r.Method, start: start}
	switch r.Method {
	case mcpmsg.MethodSubscribe, mcpmsg.MethodUnsubscribe:
		// The upstream is subscribed once per resource, on behalf of all:
		// by the first subscriber, and unsubscribed by the last.
		c.uri = mcpmsg.StringParam(r.Params, "uri")
		var tell bool
		if r.Method == mcpmsg.MethodSubscribe {
			tell = m.subs.add(s, c.uri)
		} else {
			tell = m.subs.remove(s, c.uri)
		}
		if !tell {
			m.opts.Events.Answered(r.Method, start, OutcomeOK)
			s.send(mcpmsg.EmptyResult(r.ID), jsonrpc.ID{})
			return
		}
	case mcpmsg.MethodSetLevel:
		// Shared by every caller, like any state the upstream keeps per
		// session; remembered to be set again after a restart.
		m.mu.Lock()
		m.logLevel = r.Params
		m.mu.Unlock()
	}
	if err := m.forward(c, r); err != nil {
		if r.Method == mcpmsg.MethodSubscribe {
			m.subs.remove(s, c.uri)
		}
		m.opts.Events.Answered(r.Method, start, OutcomeUpstreamDown)
		s.send(mcpmsg.ErrorResponse(r.ID, CodeUpstreamUnavailable, "%v", err), jsonrpc.ID{})
		c.settle()
	}
}

func (s *Session) notification(r *jsonrpc.Request) {
	m := s.m
	switch r.Method {
	case mcpmsg.MethodInitialized:
		return // the mux sent its own, once
	case mcpmsg.MethodRootsChanged:
		return // roots are not offered upstream
	case mcpmsg.MethodCancelled:
		id, _, ok := mcpmsg.CancelledRequest(r.Params)
		if !ok {
			return
		}
		c, ok := m.calls.takeOf(s, id)
		if !ok {
			return // answered already
		}
		c.settle() // a cancelled request is owed no answer
		m.opts.Events.Answered(c.method, c.start, OutcomeCancelled)
		up, err := mcpmsg.WithCancelledRequest(r, c.upID)
		if err != nil {
			return
		}
		if err := m.link.Write(c.gen, up); err != nil {
			m.log.Debug("cancellation not delivered upstream", "err", err)
		}
		return
	}
	// Progress on a request the upstream sent this caller carries the
	// upstream's own token; anything else passes as it is.
	gen, up := m.link.Current()
	if !up {
		return
	}
	if err := m.link.Write(gen, r); err != nil {
		m.log.Debug("notification not delivered upstream", "method", r.Method, "err", err)
	}
}

// Leave ends the caller's session: its requests are cancelled upstream,
// requests routed to it are answered with an error, and resources only it
// watched are unsubscribed. Nothing is sent to the caller once Leave has
// returned; a Send in progress finishes first, so a Caller whose Send can
// block must unblock it before calling Leave.
func (s *Session) Leave() {
	m := s.m
	s.sending.Lock()
	left := s.left
	s.left = true
	s.sending.Unlock()
	if left {
		return
	}
	m.mu.Lock()
	delete(m.sessions, s)
	m.mu.Unlock()

	mine := m.calls.takeAll(func(c *call) bool { return c.s == s })
	asked := m.routed.takeAll(s)
	unwatched := m.subs.drop(s)
	for _, c := range mine {
		c.settle() // nobody is left to answer
		m.opts.Events.Answered(c.method, c.start, OutcomeCancelled)
		if err := m.link.Write(c.gen, mcpmsg.Cancelled(c.upID, "the client went away")); err != nil {
			m.log.Debug("cancellation not delivered upstream", "err", err)
		}
	}
	for id, to := range asked {
		m.link.Write(to.gen, mcpmsg.ErrorResponse(id, jsonrpc.CodeInternalError, "the client this request was routed to went away"))
	}
	for _, uri := range unwatched {
		m.internal(mcpmsg.MethodUnsubscribe, uriParams(uri))
	}
}
