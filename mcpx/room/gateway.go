package room

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
)

// Compat selects wire details where the v0 spec and the reference gateway
// disagree.
type Compat string

const (
	// CompatSpec (the default) sends the welcome of the v0 spec, before any
	// presence, and does not echo a joiner's own join.
	CompatSpec Compat = "spec"
	// CompatReference sends what the reference gateway sends: the joiner's
	// own presence join first, then a welcome with payload.type,
	// participant_id, topic and the history tail, addressed to the joiner.
	CompatReference Compat = "reference"
)

// Visibility is who sees directed envelopes, live and in history.
type Visibility string

const (
	// VisibilityDirected (the default): a directed envelope reaches its
	// recipients only; broadcasts reach everyone, the sender included.
	// History shows a reader broadcasts, what it sent and what was
	// addressed to it.
	VisibilityDirected Visibility = "directed"
	// VisibilityTopic is the spec's "all published messages in a topic are
	// visible to all participants": directed envelopes reach every
	// participant but the sender, and history shows everything.
	VisibilityTopic Visibility = "topic"
)

// TokenVerifier checks a bearer token and returns its claims. *Keys is one.
type TokenVerifier interface {
	Verify(token string, now time.Time) (*Claims, error)
}

// HistoryStore keeps each topic's envelopes. *history.Store is one.
//
// The gateway reserves a place in the commit queue (Reserve) before it
// takes a topic's lock, waiting there while the queue is full, then, under
// the lock, calls NextSeq and Append, which must not wait. It echoes an
// envelope to its sender, and so acknowledges it, only from Append's
// committed callback. Query and Lookup see every record appended before
// them.
type HistoryStore interface {
	HistoryReader
	NextSeq(topic string) (uint64, error)
	Reserve(ctx context.Context) error
	Release()
	Append(topic string, r history.Record, committed func(error)) error
}

// HistoryReader is the reading side of history: what the welcome and the
// REST endpoints need. A HistoryStore is one, and so is what a Backend's
// History returns.
type HistoryReader interface {
	LatestSeq(topic string) (uint64, error)
	Query(ctx context.Context, topic string, q history.Query) (history.Page, error)
	Lookup(ctx context.Context, topic, id string, visible func(from string, to []string) bool) (seq uint64, ok bool, err error)
	Topics() ([]string, error)
}

// Options configure a Gateway. Zero values select the defaults given.
type Options struct {
	// Tokens verifies bearer tokens. Required.
	Tokens TokenVerifier
	// History stores envelopes; nil disables history (the welcome says
	// enabled:false and the history endpoint answers 404).
	History HistoryStore
	// Backend keeps the roster, the log and presence; nil keeps them in
	// this process, with History as the log's storage. Set, it replaces
	// History (which must be nil): package mcpx/room/roomnats makes this
	// gateway one node of several sharing NATS JetStream.
	Backend Backend

	Compat     Compat     // default CompatSpec
	Visibility Visibility // default VisibilityDirected

	// AllowedOrigins are extra Origin hosts (patterns as in path.Match, e.g.
	// "*.example.com") allowed to open WebSockets. A request without Origin
	// (not a browser) or with an Origin naming the request's own host is
	// always allowed.
	AllowedOrigins []string

	// Page, when set, is the browser page served at "/" and its files
	// under /ui/ (cvm room serve sets roompage.Handler).
	Page http.Handler

	MaxFrameBytes   int64 // largest envelope accepted (default 1 MiB)
	MaxParticipants int   // per topic (default 200)
	// SendQueueFrames and SendQueueBytes bound each connection's outbound
	// queue (defaults 4096 frames, 8 MiB); a connection over either is
	// dropped as a slow consumer.
	SendQueueFrames int
	SendQueueBytes  int
	// RatePerSecond and RateBurst are each participant's token bucket
	// (defaults 50/s, burst 100); a negative rate disables limiting.
	RatePerSecond float64
	RateBurst     int
	// MaxUncommitted is how many of one connection's envelopes may wait
	// for their commit (default 256); its next frame is read once one is
	// stored. It keeps one publisher from taking the whole commit queue.
	MaxUncommitted int

	// HeartbeatInterval is how often each connection is pinged and, when it
	// answers, a presence heartbeat is published (default 30 s; negative
	// disables both). PongTimeout is how long a pong may take before the
	// peer counts as gone (default 10 s).
	HeartbeatInterval time.Duration
	PongTimeout       time.Duration
	// WriteTimeout bounds each socket write (default 10 s).
	WriteTimeout time.Duration

	// HistoryPageLimit is the largest page the history endpoint returns
	// (default 1000); DefaultHistoryPage is the page size when limit is
	// not given (default 100). WelcomeHistory is the tail the reference
	// welcome carries (default 100).
	HistoryPageLimit   int
	DefaultHistoryPage int
	WelcomeHistory     int

	Logger *slog.Logger
	Now    func() time.Time // the clock; tests set it
}

func (o *Options) defaults() error {
	if o.Tokens == nil {
		return errors.New("mcpx: Options.Tokens is required")
	}
	switch o.Compat {
	case "":
		o.Compat = CompatSpec
	case CompatSpec, CompatReference:
	default:
		return fmt.Errorf("mcpx: compat %q: want %q or %q", o.Compat, CompatSpec, CompatReference)
	}
	switch o.Visibility {
	case "":
		o.Visibility = VisibilityDirected
	case VisibilityDirected, VisibilityTopic:
	default:
		return fmt.Errorf("mcpx: visibility %q: want %q or %q", o.Visibility, VisibilityDirected, VisibilityTopic)
	}
	o.MaxFrameBytes = cmp.Or(o.MaxFrameBytes, 1<<20)
	o.MaxParticipants = cmp.Or(o.MaxParticipants, 200)
	o.SendQueueFrames = cmp.Or(o.SendQueueFrames, 4096)
	o.SendQueueBytes = cmp.Or(o.SendQueueBytes, 8<<20)
	o.RatePerSecond = cmp.Or(o.RatePerSecond, 50)
	o.RateBurst = cmp.Or(o.RateBurst, 100)
	o.MaxUncommitted = cmp.Or(o.MaxUncommitted, 256)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, 30*time.Second)
	o.PongTimeout = cmp.Or(o.PongTimeout, 10*time.Second)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, 10*time.Second)
	o.HistoryPageLimit = cmp.Or(o.HistoryPageLimit, 1000)
	o.DefaultHistoryPage = cmp.Or(o.DefaultHistoryPage, 100)
	o.WelcomeHistory = cmp.Or(o.WelcomeHistory, 100)
	if o.DefaultHistoryPage > o.HistoryPageLimit {
		o.DefaultHistoryPage = o.HistoryPageLimit
	}
	if o.Backend != nil && o.History != nil {
		return errors.New("mcpx: Options.Backend replaces History; set one of them")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Gateway is an MCPx v0 gateway: an http.Handler serving the WebSocket
// endpoint, the REST helpers, /healthz and /metrics. Create it with New and
// stop it with Close; it is safe for concurrent use.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	backend Backend
	local   *localBackend // the backend, when the gateway made it
	node    string        // backend.Node()
	hist    HistoryReader // nil: history disabled
	pubs    atomic.Uint64 // numbers this node's appends to the log
	metrics *metrics
	mux     *http.ServeMux
	started time.Time

	mu       sync.Mutex
	topics   map[string]*topic
	sessions map[*session]struct{}
	closing  bool
	handlers sync.WaitGroup // one per WebSocket connection being served
}

// New returns a Gateway. It does not listen: serve it with net/http, or use
// Start.
func New(opts Options) (*Gateway, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	g := &Gateway{
		opts:     opts,
		log:      opts.Logger,
		backend:  opts.Backend,
		topics:   map[string]*topic{},
		sessions: map[*session]struct{}{},
		started:  opts.Now(),
	}
	if g.backend == nil {
		g.local = newLocalBackend(opts.History, opts.Now, opts.Logger)
		g.backend = g.local
	}
	g.node, g.hist = g.backend.Node(), g.backend.History()
	g.metrics = newMetrics(g.backend)
	g.routes()
	return g, nil
}

func (g *Gateway) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /v0/ws", g.serveWS)
	m.HandleFunc("GET /v0/topics", g.serveTopics)
	m.HandleFunc("GET /v0/topics/{topic}/participants", g.serveParticipants)
	m.HandleFunc("GET /v0/topics/{topic}/history", g.serveHistory)
	m.HandleFunc("GET /healthz", g.serveHealth)
	m.Handle("GET /metrics", g.metrics.handler())
	if g.opts.Page != nil {
		m.Handle("GET /{$}", g.opts.Page)
		m.Handle("GET /ui/", g.opts.Page)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, mcpx.CodeNotFound, fmt.Sprintf("no endpoint %s %s; see GET /v0/ws, /v0/topics, /healthz, /metrics", r.Method, r.URL.Path))
	})
	g.mux = m
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A method the mux knows under another verb gets 405 from ServeMux in
	// plain text; answer in JSON like every other refusal.
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, mcpx.CodeMethodNotAllow, "only GET is served")
		return
	}
	g.mux.ServeHTTP(w, r)
}

// topic returns the state of name, creating it.
func (g *Gateway) topic(name string) (*topic, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return nil, ErrClosed
	}
	if t, ok := g.topics[name]; ok {
		return t, nil
	}
	t := newTopic(g, name)
	if err := t.open(); err != nil {
		return nil, err
	}
	g.topics[name] = t
	return t, nil
}

// existingTopic returns the state of name if it has been created.
func (g *Gateway) existingTopic(name string) *topic {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.topics[name]
}

// Close disconnects every participant (close 1001, after flushing what was
// queued for them) and waits for their connections to finish. When ctx is
// done first it drops the rest and returns ctx's error. It does not close
// Options.History or Options.Backend.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return nil
	}
	g.closing = true
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	topics := g.topics
	g.mu.Unlock()
	for _, s := range sessions {
		s.close(closeGoingAway, "gateway shutting down", mcpx.LeaveShutdown)
	}
	done := make(chan struct{})
	go func() {
		g.handlers.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		for _, s := range sessions {
			s.kill(mcpx.LeaveShutdown)
		}
		<-done
		err = ctx.Err()
		g.log.Info("dropped connections that did not finish the close handshake in time")
	}
	for _, t := range topics {
		t.unsubscribe()
	}
	if g.local != nil {
		g.local.Close()
	}
	return err
}

func (g *Gateway) track(s *session) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.sessions[s] = struct{}{}
	g.handlers.Add(1) // under mu, so never concurrent with Close's Wait at zero
	g.metrics.connections.Inc()
	return true
}

func (g *Gateway) untrack(s *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sessions, s)
	g.metrics.connections.Dec()
}

// retryAfter is what unavailable error envelopes advise: the backend's
// RetryAfter, if it has one, else a second.
func (g *Gateway) retryAfter() time.Duration {
	if r, ok := g.backend.(interface{ RetryAfter() time.Duration }); ok {
		return r.RetryAfter()
	}
	return time.Second
}

func (g *Gateway) isClosing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closing
}

// knownTopics lists topics that have participants now or stored history.
func (g *Gateway) knownTopics() ([]string, error) {
	set := map[string]bool{}
	g.mu.Lock()
	for name, t := range g.topics {
		if t.size() > 0 {
			set[name] = true
		}
	}
	g.mu.Unlock()
	if g.hist != nil {
		stored, err := g.hist.Topics()
		if err != nil {
			return nil, err
		}
		for _, t := range stored {
			set[t] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}
