package mcpmux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CodeUpstreamUnavailable answers a request the upstream cannot take: it
// could not be started, it died with the request in flight, or it is being
// restarted. It is JSON-RPC's internal error: from the caller's side, the
// server failed.
const CodeUpstreamUnavailable = jsonrpc.CodeInternalError

// Routing says where a request of the upstream's (sampling, elicitation)
// goes. Over a shared session nothing on the wire links such a request to
// the caller's request that caused it (stdio and the go-sdk keep
// relatedRequestId off the wire), so it is inferred from what is in
// flight. Only callers that declared the capability the request needs
// qualify.
type Routing int

const (
	// RouteSole sends it to the one caller with requests in flight; with
	// none or several in flight it is refused with an error that says so.
	// It never guesses.
	RouteSole Routing = iota
	// RouteNewest sends it to the caller of the newest request in flight
	// among the callers that declared the capability: exact when one
	// caller at a time is calling, a guess otherwise.
	RouteNewest
)

// Outcome is how a caller's request ended, for metrics.
type Outcome string

const (
	OutcomeOK           Outcome = "ok"            // answered with a result
	OutcomeError        Outcome = "error"         // answered with an error by the upstream
	OutcomeUpstreamDown Outcome = "upstream_down" // failed: the upstream was down or died
	OutcomeCancelled    Outcome = "cancelled"     // its caller cancelled it
)

// Events are told what a Mux does, for metrics. Any may be nil; they must
// return quickly.
type Events struct {
	// Answered is told of every request of a caller once it is over.
	Answered func(method string, start time.Time, outcome Outcome)
	// Unroutable is told of a request of the upstream's refused because no
	// caller could be chosen to answer it.
	Unroutable func(method, why string)
	Link       LinkEvents
}

// Options configure a Mux. Zero values take the defaults beside them.
type Options struct {
	Upstream Upstream // required
	// ClientInfo and Capabilities are what the mux says of itself in its
	// initialize (defaults "cvm", and sampling and elicitation, which it
	// relays to callers). ProtocolVersion is the version it asks for.
	ClientInfo      *mcp.Implementation
	Capabilities    *mcp.ClientCapabilities
	ProtocolVersion string // required

	Routing Routing
	// Name is who answers when the mux refuses something ("cvm gateway
	// (shared session mode)"), and Hint what it suggests to a caller whose
	// request could not be routed; both go into error messages.
	Name, Hint string

	InitializeTimeout, RestartMin, RestartMax, StableAfter time.Duration // see LinkOptions

	Events Events
	Logger *slog.Logger
}

// Mux serves many callers through one upstream session. Its methods are
// safe for concurrent use.
type Mux struct {
	opts Options
	link *Link
	log  *slog.Logger

	calls  *calls
	routed *routed
	subs   *subscriptions

	mu       sync.Mutex
	result   json.RawMessage // the upstream's initialize result, every caller's answer
	info     mcp.InitializeResult
	sessions map[*Session]bool
	logLevel json.RawMessage // the latest logging/setLevel params, replayed after a restart
}

// Open starts the upstream session, performs the handshake, and starts
// serving. It fails if the upstream does not come up.
func Open(ctx context.Context, opts Options) (*Mux, error) {
	if opts.Upstream == nil {
		return nil, errors.New("mcpmux: Options.Upstream is required")
	}
	if opts.ClientInfo == nil {
		opts.ClientInfo = &mcp.Implementation{Name: "cvm", Version: "1"}
	}
	if opts.Capabilities == nil {
		//lint:ignore SA1019 the mux relays sampling to callers; it is deprecated (SEP-2577), not gone
		opts.Capabilities = &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}}
	}
	if opts.Name == "" {
		opts.Name = "cvm"
	}
	for _, f := range []*func(string, string){&opts.Events.Unroutable} {
		if *f == nil {
			*f = func(string, string) {}
		}
	}
	if opts.Events.Answered == nil {
		opts.Events.Answered = func(string, time.Time, Outcome) {}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	params, err := mcpmsg.Marshal(&mcp.InitializeParams{
		ProtocolVersion: opts.ProtocolVersion,
		ClientInfo:      opts.ClientInfo,
		Capabilities:    opts.Capabilities,
	})
	if err != nil {
		return nil, err
	}
	l, hs, err := OpenLink(ctx, LinkOptions{
		Upstream:          opts.Upstream,
		Params:            params,
		Initialized:       true,
		InitializeTimeout: opts.InitializeTimeout,
		RestartMin:        opts.RestartMin,
		RestartMax:        opts.RestartMax,
		StableAfter:       opts.StableAfter,
		Events:            opts.Events.Link,
		Logger:            opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	m := &Mux{
		opts:     opts,
		link:     l,
		log:      opts.Logger,
		calls:    newCalls(),
		routed:   newRouted(),
		subs:     newSubscriptions(),
		sessions: make(map[*Session]bool),
	}
	m.setResult(hs.Result)
	// Nobody is connected yet to hear what the upstream said early.
	l.Start(m, nil)
	return m, nil
}

// Close ends the upstream session and waits for it (a child process has
// exited when Close returns). Callers should have left first; what they
// still send is answered with errors.
func (m *Mux) Close() { m.link.Close() }

// Result is the upstream's initialize result, as it answered the mux.
func (m *Mux) Result() mcp.InitializeResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.info
}

// DownReason says why the upstream is down, or nil while it is up.
func (m *Mux) DownReason() error { return m.link.DownReason() }

func (m *Mux) setResult(raw json.RawMessage) {
	var info mcp.InitializeResult
	json.Unmarshal(raw, &info)
	m.mu.Lock()
	m.result, m.info = raw, info
	m.mu.Unlock()
}

func (m *Mux) initializeResult() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.result
}

// members returns the sessions that have initialized.
func (m *Mux) members() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for s := range m.sessions {
		if s.isInitialized() {
			out = append(out, s)
		}
	}
	return out
}

// forward sends a request upstream under an id (and a progress token) of
// the mux's, remembering whose it is. With the upstream down, or the write
// failing, it returns the reason and c is not in flight: the caller answers
// it, then settles it.
func (m *Mux) forward(c *call, req *jsonrpc.Request) error {
	gen, up := m.link.Current()
	if !up {
		return fmt.Errorf("%v; %s is restarting it, retry shortly", m.link.DownReason(), m.opts.Name)
	}
	c.gen = gen
	if tok, ok := mcpmsg.ProgressToken(req); ok && c.s != nil {
		c.token = tok
	}
	m.calls.add(c)
	wire := &jsonrpc.Request{ID: c.upID, Method: req.Method, Params: req.Params}
	if !c.upToken.IsZero() {
		var err error
		if wire, err = mcpmsg.WithProgressToken(wire, c.upToken); err != nil {
			m.calls.take(c.upID)
			return err
		}
	}
	if err := m.link.Write(gen, wire); err != nil {
		if _, ok := m.calls.take(c.upID); ok {
			return err
		}
	}
	return nil
}

// internal sends a request of the mux's own; its answer goes nowhere.
func (m *Mux) internal(method string, params json.RawMessage) {
	c := &call{method: method, start: time.Now()}
	if err := m.forward(c, &jsonrpc.Request{Method: method, Params: params}); err != nil {
		c.settle()
		m.log.Warn("the mux's own request did not reach the upstream", "method", method, "err", err)
	}
}

func uriParams(uri string) json.RawMessage {
	p, _ := mcpmsg.Marshal(map[string]string{"uri": uri})
	return p
}

// FromUpstream implements Handler.
func (m *Mux) FromUpstream(gen uint64, msg jsonrpc.Message) {
	switch r := msg.(type) {
	case *jsonrpc.Response:
		m.answerFromUpstream(r)
	case *jsonrpc.Request:
		if r.IsCall() {
			m.requestFromUpstream(gen, r)
		} else {
			m.notificationFromUpstream(r)
		}
	}
}

func (m *Mux) answerFromUpstream(r *jsonrpc.Response) {
	c, ok := m.calls.take(r.ID)
	if !ok {
		m.log.Debug("dropping an upstream answer to no request in flight", "id", r.ID.Raw())
		return
	}
	defer c.settle()
	if c.s == nil {
		if r.Error != nil {
			m.log.Warn("the upstream refused a request of the mux's own", "method", c.method, "err", r.Error)
		}
		return
	}
	outcome := OutcomeOK
	if r.Error != nil {
		outcome = OutcomeError
		if c.method == mcpmsg.MethodSubscribe {
			m.subs.remove(c.s, c.uri)
		}
	}
	m.opts.Events.Answered(c.method, c.start, outcome)
	c.s.send(&jsonrpc.Response{ID: c.origID, Result: r.Result, Error: r.Error}, jsonrpc.ID{})
}

// requestFromUpstream routes a request of the upstream's to a caller; see
// Routing. Ping is the mux's to answer: the upstream's one client is the
// mux, which is alive.
func (m *Mux) requestFromUpstream(gen uint64, r *jsonrpc.Request) {
	switch r.Method {
	case mcpmsg.MethodPing:
		m.link.Write(gen, mcpmsg.EmptyResult(r.ID))
		return
	case mcpmsg.MethodRootsList:
		m.link.Write(gen, mcpmsg.ErrorResponse(r.ID, jsonrpc.CodeMethodNotFound, "%s offers no roots: a shared session has no single answer to roots/list", m.opts.Name))
		return
	}
	target, related, why := m.route(r.Method)
	if target == nil {
		m.opts.Events.Unroutable(r.Method, why)
		m.log.Info("refused a request of the upstream's", "method", r.Method, "why", why)
		m.link.Write(gen, mcpmsg.ErrorResponse(r.ID, jsonrpc.CodeInternalError, "%s cannot deliver %s: %s", m.opts.Name, r.Method, why))
		return
	}
	m.routed.add(r.ID, route{s: target, gen: gen})
	if err := target.send(r, related); err != nil {
		if _, ok := m.routed.take(r.ID, target); ok {
			m.link.Write(gen, mcpmsg.ErrorResponse(r.ID, jsonrpc.CodeInternalError, "%s could not deliver %s to its caller: %v", m.opts.Name, r.Method, err))
		}
	}
}

// route chooses the caller of a request of the upstream's, and the
// caller's request that caused it.
func (m *Mux) route(method string) (*Session, jsonrpc.ID, string) {
	declared := func(s *Session) bool { return s.declares(method) }
	switch m.opts.Routing {
	case RouteNewest:
		var best *call
		m.calls.each(func(c *call) {
			if declared(c.s) && (best == nil || c.seq > best.seq) {
				best = c
			}
		})
		if best == nil {
			return nil, jsonrpc.ID{}, "no caller with a call in flight supports it"
		}
		return best.s, best.origID, ""
	default:
		busy := map[*Session]*call{}
		m.calls.each(func(c *call) {
			if prev := busy[c.s]; prev == nil || c.seq > prev.seq {
				busy[c.s] = c
			}
		})
		switch len(busy) {
		case 0:
			return nil, jsonrpc.ID{}, "no client has a request in flight, so there is nobody to ask"
		case 1:
		default:
			why := fmt.Sprintf("%d clients have requests in flight and nothing says which one this is for", len(busy))
			if m.opts.Hint != "" {
				why += "; " + m.opts.Hint
			}
			return nil, jsonrpc.ID{}, why
		}
		for s, c := range busy {
			if !declared(s) {
				return nil, jsonrpc.ID{}, "the client with a request in flight did not declare that capability"
			}
			return s, c.origID, ""
		}
	}
	panic("unreachable")
}

func (m *Mux) notificationFromUpstream(r *jsonrpc.Request) {
	switch r.Method {
	case mcpmsg.MethodProgress:
		tok, _ := mcpmsg.ProgressToken(r)
		c := m.calls.byUpToken(tok)
		if c == nil {
			return
		}
		back, err := mcpmsg.WithProgressToken(r, c.token)
		if err != nil {
			return
		}
		c.s.send(back, jsonrpc.ID{})
	case mcpmsg.MethodUpdated:
		for _, s := range m.subs.subscribers(mcpmsg.StringParam(r.Params, "uri")) {
			s.send(r, jsonrpc.ID{})
		}
	case mcpmsg.MethodCancelled:
		// The upstream gave up a request it routed to a caller.
		id, _, ok := mcpmsg.CancelledRequest(r.Params)
		if !ok {
			return
		}
		if to, ok := m.routed.take(id, nil); ok {
			to.s.send(r, jsonrpc.ID{})
		}
	default:
		// list_changed, log messages and the like concern everyone.
		for _, s := range m.members() {
			s.send(r, jsonrpc.ID{})
		}
	}
}

// UpstreamDown implements Handler: every request in flight on connection
// gen is answered with an error at once, never left to time out.
func (m *Mux) UpstreamDown(gen uint64, why error) {
	dead := m.calls.takeAll(func(c *call) bool { return c.gen == gen })
	m.routed.takeAll(nil)
	for _, c := range dead {
		if c.s != nil {
			m.opts.Events.Answered(c.method, c.start, OutcomeUpstreamDown)
			c.s.send(mcpmsg.ErrorResponse(c.origID, CodeUpstreamUnavailable, "%v with this request in flight; %s is restarting it", why, m.opts.Name), jsonrpc.ID{})
		}
		c.settle()
	}
}

// UpstreamRestarted implements Handler: callers to come get the new
// initialize result; the new session is subscribed to every resource
// somebody watches and given the latest log level; callers are told that
// the lists may have changed.
func (m *Mux) UpstreamRestarted(_ uint64, result json.RawMessage) {
	m.setResult(result)
	for _, uri := range m.subs.uris() {
		m.internal(mcpmsg.MethodSubscribe, uriParams(uri))
	}
	m.mu.Lock()
	level := m.logLevel
	info := m.info
	m.mu.Unlock()
	if level != nil {
		m.internal(mcpmsg.MethodSetLevel, level)
	}
	caps := info.Capabilities
	if caps == nil {
		return
	}
	for _, n := range []struct {
		on     bool
		method string
	}{
		{caps.Tools != nil && caps.Tools.ListChanged, mcpmsg.MethodToolsChanged},
		{caps.Prompts != nil && caps.Prompts.ListChanged, mcpmsg.MethodPromptsChanged},
		{caps.Resources != nil && caps.Resources.ListChanged, mcpmsg.MethodResourcesChanged},
	} {
		if n.on {
			for _, s := range m.members() {
				s.send(&jsonrpc.Request{Method: n.method}, jsonrpc.ID{})
			}
		}
	}
}

// InFlight is the number of requests sent upstream and not yet answered,
// the mux's own included.
func (m *Mux) InFlight() int {
	return m.calls.len()
}
