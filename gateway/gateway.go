package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/admission"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/internal/mcpmux"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("gateway: closed")

// SessionMode says how client sessions map to upstream sessions.
type SessionMode int

const (
	// PerClient gives every client session an upstream session of its own.
	PerClient SessionMode = iota
	// Shared serves every client session through one upstream session.
	Shared
)

func (m SessionMode) String() string {
	switch m {
	case PerClient:
		return "per-client"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("SessionMode(%d)", int(m))
}

// ParseSessionMode reads "per-client" or "shared".
func ParseSessionMode(s string) (SessionMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "per-client":
		return PerClient, nil
	case "shared":
		return Shared, nil
	}
	return 0, fmt.Errorf("session mode %q: want per-client or shared", s)
}

// Options configure a Gateway. Zero values take the defaults beside them.
type Options struct {
	// Upstream is the MCP server to expose. Required.
	Upstream Upstream
	Mode     SessionMode

	// Server configures the ContextVM server the gateway serves through:
	// its identity (Signer, required), relays, encryption, announcements,
	// prices and access. The gateway creates and closes it, and owns its
	// session settings: Server.IdleTimeout and Server.MaxSessions are
	// ignored, since the gateway reaps idle sessions itself (IdleTimeout,
	// below) together with their upstream sessions, and in PerClient mode
	// bounds them itself (MaxSessions, below) with a policy the server
	// cannot know (an idle session gives way, a busy one never does). With
	// Server.Announce the gateway announces the upstream's lists and keeps
	// them current.
	Server contextvm.ServerOptions
	// NoNostr serves no ContextVM server: the gateway then serves only
	// the client sessions of its HTTP endpoint (HTTPHandler), and Server
	// returns nil.
	NoNostr bool

	// MaxSessions bounds the upstream sessions of PerClient mode (default
	// 64; the one stateless clients share is not counted): child processes
	// are not cheap. A client session beyond it replaces a session that
	// has nothing in flight and has been quiet for SessionGrace: the least
	// recently active of a client outside Server.AllowedClients first, an
	// allowed client's only for another allowed client. When none may give
	// way, its initialize is refused (CodeBusy, with contextvm.RetryAfter).
	// SessionReserve keeps room for the allowed clients.
	MaxSessions int
	// SessionReserve is how many of MaxSessions only the clients in
	// Server.AllowedClients may hold (default 4, at most half of
	// MaxSessions; negative: none), in the gateway's books and the
	// server's (Server.SessionReserve is set to it): the other clients
	// hold at most MaxSessions−SessionReserve between them. An allowed
	// client is never refused for room the others hold: when every
	// session is taken, one of theirs gives way to it whatever its state
	// (one with nothing in flight and the least recently active first).
	// Without Server.AllowedClients it does nothing.
	SessionReserve int
	// SessionGrace is how long after its last message a session is safe
	// from being replaced (default 30 s), in the gateway's books and the
	// server's (Server.SessionGrace is set to it).
	SessionGrace time.Duration
	// IdleTimeout ends a client session (and in PerClient mode its
	// upstream session) that has had no message from its client for this
	// long and has nothing in flight (default 10 min; negative: never).
	IdleTimeout time.Duration

	// IsolateStateless gives, in PerClient mode, a client without a
	// session an upstream session of its own too. By default the sessions
	// of such clients (stateless clients, CEP-35, which send requests
	// without initialize, as cvm call does to a server it knows) share one
	// upstream session, started with the first and closed after the last
	// (see the package doc): a one-shot client then costs no process. Set
	// it when the upstream keeps state between calls that clients must not
	// share even when they keep no session.
	IsolateStateless bool

	// ClientInfo is how the gateway introduces itself to the upstream in
	// Shared mode (default "cvm-gateway").
	ClientInfo *mcp.Implementation

	// InitializeTimeout bounds the upstream's answer to initialize
	// (default 30 s: a server fetched by npx on first use takes a while).
	InitializeTimeout time.Duration
	// RestartMin and RestartMax bound the backoff before restarting an
	// upstream that died (default 100 ms and 30 s).
	RestartMin, RestartMax time.Duration

	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.SessionGrace <= 0 {
		o.SessionGrace = admission.DefaultGrace
	}
	if o.ClientInfo == nil {
		o.ClientInfo = &mcp.Implementation{Name: "cvm-gateway", Version: "1"}
	}
	if o.InitializeTimeout <= 0 {
		o.InitializeTimeout = 30 * time.Second
	}
	if o.RestartMin <= 0 {
		o.RestartMin = 100 * time.Millisecond
	}
	if o.RestartMax <= 0 {
		o.RestartMax = 30 * time.Second
	}
	o.RestartMax = max(o.RestartMax, o.RestartMin)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// clientConn is what the gateway needs of a client session;
// *contextvm.ServerConn is one.
type clientConn interface {
	mcp.Connection
	Client() nostr.PubKey
}

// session is a client session being served, in either mode.
type session interface {
	// idleSince is when the client last sent a message; busy reports work
	// in flight. A session is reaped or replaced only when not busy.
	idleSince() time.Time
	busy() bool
	// client is the session's client key.
	client() nostr.PubKey
	// end closes the client session; its goroutine then cleans up.
	end()
}

// Gateway bridges the client sessions of a contextvm.Server to an upstream
// MCP server. Its methods are safe for concurrent use.
type Gateway struct {
	opts      Options
	metrics   *metrics
	hub       *hub       // Shared mode
	stateless *stateless // PerClient mode, unless IsolateStateless
	srv       *contextvm.Server

	ctx    context.Context // the life of every session; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	known  map[nostr.PubKey]bool // Server.AllowedClients
	policy admission.Policy      // of PerClient mode's upstream sessions
	// A slot per upstream session starting in PerClient mode: for the
	// clients in Server.AllowedClients (knownStarts) and for the others,
	// so that an allowed client's start never waits behind a crowd.
	starts, knownStarts chan struct{}

	mu       sync.Mutex
	sessions map[session]bool // every session served; true if it holds a PerClient slot
	slots    int
	closed   bool
}

// startsAtOnce bounds the upstream sessions of PerClient mode that start
// at the same time: one a core, two at least, since a start also waits on
// the upstream's answer.
func startsAtOnce() int { return max(2, runtime.GOMAXPROCS(0)) }

// serverSlack is how many client sessions beyond MaxSessions the server
// keeps in PerClient mode: sessions the gateway is refusing or replacing
// still exist there for a moment, and the server must never evict one the
// gateway counts on.
const serverSlack = 64

// New returns a gateway, with its ContextVM server subscribed on at least
// one relay. In Shared mode it starts the upstream and performs the
// handshake first, and fails if the upstream does not come up (an error
// that matches ErrUpstream); in PerClient mode nothing starts before the
// first client (see Check). ctx bounds starting.
func New(ctx context.Context, opts Options) (*Gateway, error) {
	if opts.Upstream == nil {
		return nil, errors.New("gateway: Options.Upstream is required")
	}
	opts = opts.withDefaults()
	opts.Server.IdleTimeout = -1
	opts.Server.SessionGrace = opts.SessionGrace
	opts.Server.SessionReserve = opts.SessionReserve
	opts.Server.MaxSessions = 0 // the server's default
	if opts.Mode == PerClient {
		opts.Server.MaxSessions = opts.MaxSessions + serverSlack
	}
	if opts.Server.Logger == nil {
		opts.Server.Logger = opts.Logger
	}
	gctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{
		opts:     opts,
		metrics:  newMetrics(opts.Mode),
		ctx:      gctx,
		cancel:   cancel,
		sessions: make(map[session]bool),
		known:    make(map[nostr.PubKey]bool),
		starts:   make(chan struct{}, startsAtOnce()),
	}
	g.knownStarts = make(chan struct{}, startsAtOnce())
	for _, pk := range opts.Server.AllowedClients {
		g.known[pk] = true
	}
	g.policy = admission.Policy{Max: opts.MaxSessions, Grace: opts.SessionGrace}
	if len(g.known) > 0 {
		g.policy.Reserve = admission.ResolveReserve(opts.SessionReserve, opts.MaxSessions)
	}
	switch {
	case opts.Mode == Shared:
		h, err := newHub(ctx, g, sharedMode(g))
		if err != nil {
			cancel()
			return nil, err
		}
		g.hub = h
	case !opts.IsolateStateless:
		g.stateless = newStateless(g)
	}
	if !opts.NoNostr {
		srv, err := contextvm.NewServer(ctx, opts.Server)
		if err != nil {
			if g.hub != nil {
				g.hub.close()
			}
			cancel()
			return nil, err
		}
		g.srv = srv
	}
	if opts.IdleTimeout > 0 {
		g.wg.Go(g.reapIdle)
	}
	return g, nil
}

// Server is the ContextVM server the gateway serves through: its public key
// is the gateway's identity. It is nil with Options.NoNostr.
func (g *Gateway) Server() *contextvm.Server { return g.srv }

// Check starts one upstream session, performs the handshake and closes it
// again, to find out before serving anyone whether the upstream works: a
// command that is not found or exits at once. It returns the upstream's
// initialize result.
func Check(ctx context.Context, up Upstream, timeout time.Duration) (*mcp.InitializeResult, error) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	params, _ := json.Marshal(&mcp.InitializeParams{
		ProtocolVersion: contextvm.ProtocolVersion,
		Capabilities:    &mcp.ClientCapabilities{},
		ClientInfo:      &mcp.Implementation{Name: "cvm-gateway-check", Version: "1"},
	})
	l, hs, err := mcpmux.OpenLink(ctx, mcpmux.LinkOptions{
		Upstream:          up,
		Params:            params,
		Initialized:       true,
		InitializeTimeout: timeout,
	})
	if err != nil {
		return nil, err
	}
	l.Close()
	var res mcp.InitializeResult
	if err := json.Unmarshal(hs.Result, &res); err != nil {
		return nil, fmt.Errorf("%w answered initialize with something else: %w", ErrUpstream, err)
	}
	return &res, nil
}

// Serve bridges every client session the server accepts until ctx ends
// or the gateway closes, and keeps the announcements current if the
// server's options ask for them. Sessions outlive ctx: Close ends them.
func (g *Gateway) Serve(ctx context.Context) error {
	if g.srv == nil {
		// Only HTTP sessions, which HTTPHandler starts itself.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.ctx.Done():
			return ErrClosed
		}
	}
	if g.opts.Server.Announce && !g.spawn(func() { KeepAnnounced(g.ctx, g.opts.Upstream, g.srv, g.opts.Logger) }) {
		return ErrClosed
	}
	for {
		c, err := g.srv.Accept(ctx)
		if errors.Is(err, contextvm.ErrServerClosed) {
			return ErrClosed
		}
		if err != nil {
			return err
		}
		if !g.serveConn(c) {
			c.Close()
			return ErrClosed
		}
	}
}

// serveConn starts serving one client session; false if the gateway is
// closed.
func (g *Gateway) serveConn(c clientConn) bool {
	return g.spawn(func() {
		switch {
		case g.hub != nil:
			g.hub.serve(c)
		case g.stateless != nil && isStateless(c):
			g.stateless.serve(c)
		default:
			newPerClient(g, c).run()
		}
	})
}

// isStateless reports whether c is the session of a client that sent no
// initialize; contextvm.ServerConn knows.
func isStateless(c clientConn) bool {
	s, ok := c.(interface{ Stateless() bool })
	return ok && s.Stateless()
}

// readInitialize reads the first message of a client session: an
// initialize, the client's or one the contextvm.Server made on a
// stateless client's behalf. Anything else is refused, and ok is false.
func readInitialize(ctx context.Context, c clientConn, log *slog.Logger) (init *jsonrpc.Request, ok bool) {
	first, err := c.Read(ctx)
	if err != nil {
		return nil, false
	}
	init, ok = first.(*jsonrpc.Request)
	if !ok || init.Method != mcpmsg.MethodInitialize || !init.IsCall() {
		log.Warn("client session did not start with initialize", "message", fmt.Sprintf("%T", first))
		if ok {
			refuse(ctx, c, init, jsonrpc.CodeInvalidRequest, "the session must start with initialize")
		}
		return nil, false
	}
	return init, true
}

// spawn runs f on a goroutine Close waits for; false if the gateway is
// closed.
func (g *Gateway) spawn(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	// Registered under the lock Close takes before it waits.
	g.wg.Go(f)
	return true
}

// Close stops the server (which answers what is in flight with an error
// and, if asked to, deletes the announcements), ends every client session,
// and closes every upstream session, waiting for child processes to exit.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	// The server first: it answers what is in flight with "server shutting
	// down", which says more than the "session closed" of a session ended
	// under it.
	if g.srv != nil {
		g.srv.Close()
	}
	g.cancel()
	g.mu.Lock()
	all := make([]session, 0, len(g.sessions))
	for s := range g.sessions {
		all = append(all, s)
	}
	g.mu.Unlock()
	for _, s := range all {
		s.end()
	}
	g.wg.Wait()
	if g.hub != nil {
		g.hub.close()
	}
	return nil
}

// Sessions is the number of client sessions being served.
func (g *Gateway) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// slotError refuses a session for want of a free upstream session.
type slotError struct {
	max        int  // the sessions the client may take
	strangers  bool // those open to clients outside the allow-list
	grace      time.Duration
	retryAfter time.Duration
}

func (e *slotError) Error() string {
	which := ""
	if e.strangers {
		which = " open to clients outside the allow-list"
	}
	return fmt.Sprintf("gateway busy: all %d upstream sessions%s are in use (busy, or active within %v); retry later", e.max, which, e.grace)
}

// track adds a client session to the books (slot: it holds one of the
// MaxSessions upstream sessions of PerClient mode). A session that needs a
// slot is admitted as admission.Admit decides: within SessionReserve's
// bounds, and in the place of a session that gives way when no slot is
// free (one with nothing in flight that has been quiet for SessionGrace, a
// client's outside Server.AllowedClients first, an allowed client's only
// to another; any of the others' to an allowed client). If none may, track
// fails with a *slotError.
func (g *Gateway) track(s session, slot bool) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	var victim session
	if slot {
		known := g.known[s.client()]
		held := g.heldLocked()
		d := admission.Admit(time.Now(), g.policy, known, held, g.slotHolders(), g.state)
		if !d.Admit {
			g.mu.Unlock()
			g.metrics.sessionsRefused.Inc()
			err := &slotError{max: g.opts.MaxSessions, grace: g.opts.SessionGrace, retryAfter: d.RetryAfter}
			if !known && held.Sessions < g.policy.Max {
				err.max, err.strangers = g.policy.Max-g.policy.Reserve, true
			}
			return err
		}
		if d.Evict {
			victim = d.Victim
			delete(g.sessions, victim)
			g.slots--
			g.metrics.sessions.Dec()
		}
	}
	g.sessions[s] = slot
	if slot {
		g.slots++
	}
	g.mu.Unlock()
	g.metrics.sessions.Inc()
	if victim != nil {
		g.opts.Logger.Info("session limit reached: closing a session to make room", "max", g.opts.MaxSessions, "client", victim.client().Hex(),
			"for", s.client().Hex(), "busy", victim.busy())
		g.metrics.sessionsEvicted.Inc()
		victim.end()
	}
	return nil
}

// heldLocked counts the sessions holding an upstream session, and those of
// clients outside the allow-list; the caller holds g.mu.
func (g *Gateway) heldLocked() admission.Held {
	held := admission.Held{Sessions: g.slots}
	for s := range g.slotHolders() {
		if !g.known[s.client()] {
			held.Unknown++
		}
	}
	return held
}

// slotHolders yields the sessions holding an upstream session; the caller
// holds g.mu.
func (g *Gateway) slotHolders() iter.Seq[session] {
	return func(yield func(session) bool) {
		for s, slot := range g.sessions {
			if slot && !yield(s) {
				return
			}
		}
	}
}

func (g *Gateway) state(s session) admission.State {
	return admission.State{LastActive: s.idleSince(), Busy: s.busy(), Known: g.known[s.client()]}
}

// untrack removes a session that has ended.
func (g *Gateway) untrack(s session) {
	g.mu.Lock()
	slot, ok := g.sessions[s]
	delete(g.sessions, s)
	if ok && slot {
		g.slots--
	}
	g.mu.Unlock()
	if ok {
		g.metrics.sessions.Dec()
	}
}

func (g *Gateway) reapIdle() {
	interval := min(max(g.opts.IdleTimeout/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case now := <-t.C:
			g.mu.Lock()
			var idle []session
			for s, slot := range g.sessions {
				if now.Sub(s.idleSince()) >= g.opts.IdleTimeout && !s.busy() {
					// Off the books now, so that a session still shutting
					// down is neither reaped twice nor holds its slot.
					idle = append(idle, s)
					delete(g.sessions, s)
					if slot {
						g.slots--
					}
				}
			}
			g.mu.Unlock()
			for _, s := range idle {
				g.metrics.sessions.Dec()
				g.metrics.sessionsReaped.Inc()
				s.end()
			}
			if len(idle) > 0 {
				g.opts.Logger.Debug("closed idle sessions", "n", len(idle))
			}
		}
	}
}

// linkOptions are the options of every upstream session of g.
func (g *Gateway) linkOptions(params json.RawMessage, initialized bool) mcpmux.LinkOptions {
	return mcpmux.LinkOptions{
		Upstream:          g.opts.Upstream,
		Params:            params,
		Initialized:       initialized,
		InitializeTimeout: g.opts.InitializeTimeout,
		RestartMin:        g.opts.RestartMin,
		RestartMax:        g.opts.RestartMax,
		Events:            g.linkEvents(),
		Logger:            g.opts.Logger,
	}
}

// linkEvents count upstream sessions, exits and restarts.
func (g *Gateway) linkEvents() mcpmux.LinkEvents {
	m := g.metrics
	return mcpmux.LinkEvents{
		Opened:    m.upstreamSessions.Inc,
		Closed:    m.upstreamSessions.Dec,
		Exited:    m.upstreamExits.Inc,
		Restarted: m.restarts.Inc,
	}
}

// refuseSession answers the initialize of a session track refused.
func refuseSession(ctx context.Context, c clientConn, init *jsonrpc.Request, err error) {
	var full *slotError
	if errors.As(err, &full) {
		c.Write(ctx, &jsonrpc.Response{ID: init.ID, Error: contextvm.BusyError(err.Error(), full.retryAfter)})
		return
	}
	refuse(ctx, c, init, CodeBusy, "%v", err)
}

// refuse answers a client's request with an error.
func refuse(ctx context.Context, c clientConn, req *jsonrpc.Request, code int64, format string, args ...any) {
	if !req.IsCall() {
		return
	}
	c.Write(ctx, mcpmsg.ErrorResponse(req.ID, code, format, args...))
}
