package contextvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/admission"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// acceptBacklog is how many new sessions may wait for Accept before the
// router waits for it.
const acceptBacklog = 64

// ErrServerClosed is returned by Accept and Serve after Close.
var ErrServerClosed = errors.New("contextvm: server closed")

// ServerOptions configure a Server.
type ServerOptions struct {
	// Signer is the server's identity. Required.
	Signer Signer

	// Relays to listen on. Ignored when Pool is set.
	Relays []string
	// Pool, if set, is used instead of a pool of the server's own; the caller
	// keeps ownership and closes it.
	Pool *nostrx.Pool

	Encryption EncryptionMode
	GiftWrap   GiftWrapMode

	// Info is sent with the first message of each session (CEP-6 tags).
	Info ServerInfo

	// MaxSessions bounds the client sessions kept at once (default 1000).
	// When they are all taken, a new client's session replaces one only if
	// it has nothing in flight and has been quiet for SessionGrace: the
	// least recently active of a client outside AllowedClients first, and
	// a client in AllowedClients only for another one. When no session may
	// give way, the new client's request is refused with CodeServerBusy
	// and a RetryAfter. A replaced session still answers what it has in
	// flight. SessionReserve keeps room for AllowedClients.
	MaxSessions int
	// SessionReserve is how many of MaxSessions only AllowedClients may
	// hold (default 4, at most half of MaxSessions; negative: none): the
	// clients outside the list hold at most MaxSessions−SessionReserve
	// between them, and are refused (CodeServerBusy) beyond that unless
	// one of theirs gives way as above. A client in AllowedClients is
	// never refused for room the others hold: when every session is
	// taken, one of theirs gives way to it, whatever its state (one with
	// nothing in flight and the least recently active first; it still
	// answers what it has in flight). Without AllowedClients it does
	// nothing.
	SessionReserve int
	// SessionGrace is how long after its last message a session is safe
	// from being replaced (default 30 s, admission.DefaultGrace).
	SessionGrace time.Duration
	// SessionRate and SessionBurst bound how fast new sessions start:
	// overall, SessionRate a second with bursts of SessionBurst (default
	// 20 and 64), and for one client key, a quarter of each. A start over
	// the limit is refused with CodeServerBusy and a RetryAfter. The
	// clients in AllowedClients have an overall budget of their own, which
	// the others cannot spend. A negative SessionRate is no limit.
	SessionRate  float64
	SessionBurst int
	// IdleTimeout closes a session with nothing in flight after this long
	// without a message (default 30 min; negative: never).
	IdleTimeout time.Duration

	// AllowedClients, if not empty, are the only clients served, except for
	// PublicCapabilities, which everyone may use. Authorize, if set, is
	// consulted for every request after that. A refused request is answered
	// with CodeUnauthorized, never dropped in silence.
	AllowedClients     []nostr.PubKey
	PublicCapabilities []Capability
	Authorize          Authorizer

	// State is where the server keeps what must survive its restart: the
	// ids of the requests it has acted on, so that a request replayed
	// after a restart is not executed again. Nil keeps them in memory
	// (durable.NewMemory): a replay within the freshness window of a
	// restart would then run again. cvm gateway keeps them in its data
	// directory (durable.Open), one store per server key. The Store's
	// bound applies: when it is full of ids still fresh, new requests are
	// refused (CodeServerBusy) rather than an id forgotten.
	State durable.Store

	// Freshness is how far from now an event's created_at may be
	// (default DefaultFreshness). Older and newer events are dropped, with a
	// log line; within the window each event is processed once.
	Freshness time.Duration

	// MaxEventBytes is the largest event the server publishes (default
	// 128 KiB; a gift wrap is limited to NIP-44's 65,535-byte plaintext
	// anyway). A response that does not fit is replaced by an error response
	// that says so.
	MaxEventBytes int

	// OversizedThreshold is the size of a published event above which an
	// answer is sent as CEP-22 fragments, to clients that support them
	// (default DefaultOversizedThreshold; negative turns fragmentation off).
	// Transfers bound the fragmented requests the server reassembles.
	OversizedThreshold int
	Transfers          TransferLimits

	// OpenStreams lets tools stream results (CEP-41, see OpenStream) to
	// clients that read them; Streams bounds them. Off by default, as in the
	// reference.
	OpenStreams bool
	Streams     StreamLimits

	// Announce makes Serve publish the server's public announcements (CEP-6:
	// kinds 11316–11320) and relay list (CEP-17: 10002, unless NoRelayList)
	// to Relays, and publish them again whenever a list changes. A server run
	// with Accept calls Announce or KeepAnnounced itself.
	// UnannounceOnClose deletes them (kind 5) when the server closes.
	Announce          bool
	NoRelayList       bool
	UnannounceOnClose bool
	// AnnounceRelays are relays the announcements and the relay list are
	// also published to (and deleted from), without the server listening
	// there: where clients look servers up (CEP-17), as the reference SDK
	// publishes to its bootstrap relays. The relay list still names only
	// the relays the server listens on.
	AnnounceRelays []string

	// Prices are advertised as cap tags on the announcements and on every
	// list response (CEP-8). They are collected only by a Gate.
	Prices []Price
	// Gate, if set, is shown each request before the MCP handler, and
	// may take it: package contextvm/cep8's collects Prices before it
	// runs a priced request (CEP-8).
	Gate Gate

	// CommonTools are the names of the tools this server declares as
	// implementing a common schema (CEP-15): their schema hash is written
	// into their _meta in tools/list answers and announcements, and
	// announced with ["i", hash, name] tags, plus one ["t", category] per
	// ToolCategories entry.
	CommonTools    []string
	ToolCategories []string

	// InjectClientPubkey also puts the caller's public key in each request's
	// params._meta.clientPubkey (CEP-16), for servers that cannot call
	// ClientPubkey.
	InjectClientPubkey bool

	// Workers is how many inbound events are opened and verified at once
	// (default 2×GOMAXPROCS).
	Workers int

	// Replicas, if set, makes this server one replica of a group serving
	// the same key: requests, sessions and payment state are coordinated
	// through it (package contextvm/replica, on NATS JetStream; see
	// docs/replicas.md). State, if nil, is then the group's shared store.
	Replicas Coordinator

	Logger *slog.Logger
}

// Server serves MCP to many clients over Nostr under one identity. Each
// client session is a ServerConn, handed out by Accept in the manner of a
// net.Listener; Serve connects each to a go-sdk mcp.Server.
//
// Inbound events are verified, deduplicated and demultiplexed by client
// public key. A new initialize from a client starts a new session; a request
// from a client without a session (a stateless client, CEP-35) starts one
// that is initialized on the client's behalf.
type Server struct {
	endpoint
	opts    ServerOptions
	ownPool bool
	sub     *nostrx.Subscription

	accepted chan *ServerConn
	closed   chan struct{}
	once     sync.Once

	// intake is the work that brings messages in or goes on by itself: the
	// pipeline, the idle reaper, the announcer. Close ends it first.
	intake *lifetime
	// life is the work that answers: refusals, transfer frames, closing
	// retired sessions. Every publish derives its context from it, and
	// Close ends it last, once the sessions have answered what they had in
	// flight. Sessions' own lifetimes are its children.
	life *lifetime
	// answering bounds the answers sessions send at once while they close.
	answering chan struct{}

	auth      authorization
	replay    *replayGuard  // outer wrap ids: refused before paying to decrypt
	window    time.Duration // the freshness window
	transfers *reassembler
	announcer announcer
	// announcePool publishes to ServerOptions.AnnounceRelays; nil without.
	announcePool *nostrx.Pool

	sessions *sessionTable
	starts   *admission.Limiter[nostr.PubKey] // new sessions, per client and overall (of clients outside AllowedClients, with the list)
	outbound registry[nostr.ID, *ServerConn]  // server-to-client requests awaiting an answer, by event id
	gate     Gate                             // ServerOptions.Gate, nil without
	// replicas decides which messages this server acts on: its
	// ServerOptions.Replicas, or solo, which acts on all of them.
	replicas Coordinator
	// routerCalls are functions to run on the router goroutine
	// (Host.OnRouter).
	routerCalls chan func(context.Context)

	// knownStarts limits the new sessions of AllowedClients, on a budget
	// a flood of other keys cannot spend.
	knownStarts *admission.Limiter[nostr.PubKey]
}

// withDefaults fills in the zero values that have defaults.
func (o ServerOptions) withDefaults() ServerOptions {
	if o.MaxSessions <= 0 {
		o.MaxSessions = 1000
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 30 * time.Minute
	}
	if o.SessionGrace <= 0 {
		o.SessionGrace = admission.DefaultGrace
	}
	if o.SessionRate == 0 {
		o.SessionRate = admission.DefaultRate
	}
	if o.SessionBurst <= 0 {
		o.SessionBurst = admission.DefaultBurst
	}
	if o.Workers <= 0 {
		o.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = DefaultMaxEventBytes
	}
	if o.OversizedThreshold == 0 {
		o.OversizedThreshold = DefaultOversizedThreshold
	}
	if o.Freshness <= 0 {
		o.Freshness = DefaultFreshness
	}
	if o.State == nil && o.Replicas == nil {
		o.State = durable.NewMemory(durable.Options{}) // a group's is its coordinator's
	}
	return o
}

// NewServer subscribes to the relays and returns once the subscription is
// live on at least one of them, or ctx ends.
func NewServer(ctx context.Context, opts ServerOptions) (*Server, error) {
	if opts.Signer == nil {
		return nil, errors.New("contextvm: ServerOptions.Signer is required")
	}
	if opts.Pool == nil && len(opts.Relays) == 0 {
		return nil, errors.New("contextvm: no relays: give at least one relay URL")
	}
	me, err := opts.Signer.GetPublicKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("contextvm: server key: %w", err)
	}
	opts = opts.withDefaults()
	var pool relayPool = opts.Pool
	own := opts.Pool == nil
	if own {
		pool = nostrx.NewPool(nostrx.PoolOptions{Relays: opts.Relays, Signer: opts.Signer, Logger: opts.Logger})
	}
	s := newServer(opts, endpoint{pool: pool, signer: opts.Signer, me: me, log: opts.Logger, maxEvent: opts.MaxEventBytes})
	s.ownPool = own
	if opts.Replicas != nil {
		store, err := opts.Replicas.Join(ctx, &Host{s})
		if err != nil {
			// A replica that could not join deletes nothing: the
			// announcements are the group's.
			s.opts.UnannounceOnClose = false
			s.Close()
			return nil, fmt.Errorf("contextvm: replica group: %w", err)
		}
		if s.opts.State == nil {
			s.opts.State = store
		}
		s.replicas = opts.Replicas
	}
	if len(opts.AnnounceRelays) > 0 {
		s.announcePool = nostrx.NewPool(nostrx.PoolOptions{Relays: opts.AnnounceRelays, Signer: opts.Signer, Logger: opts.Logger})
	}
	if opts.Gate != nil {
		if err := opts.Gate.Attach(&Host{s}); err != nil {
			s.Close()
			return nil, err
		}
		s.gate = opts.Gate
	}
	// Stored wraps from a little before now: those sent while it started.
	s.sub = pool.SubscribeFilters(opts.GiftWrap.inboxFilters(me, nostr.Now()-10), 1024)
	select {
	case <-s.sub.Ready():
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("contextvm: no relay answered the subscription: %w", context.Cause(ctx))
	}
	s.intake.Go(func(context.Context) { s.pipeline() })
	if opts.IdleTimeout > 0 {
		s.intake.Go(func(context.Context) { s.reapIdle() })
	}
	return s, nil
}

// maxAnswersAtClose bounds the error answers that closing sessions publish
// at once: a server closing with thousands of requests in flight answers
// them concurrently, but not with thousands of goroutines signing and
// encrypting at the same time.
const maxAnswersAtClose = 32

// newServer makes a server that has not subscribed yet; opts has its
// defaults.
func newServer(opts ServerOptions, e endpoint) *Server {
	s := &Server{
		endpoint:  e,
		opts:      opts,
		accepted:  make(chan *ServerConn, acceptBacklog),
		closed:    make(chan struct{}),
		intake:    newLifetime(context.Background()),
		life:      newLifetime(context.Background()),
		answering: make(chan struct{}, maxAnswersAtClose),
		auth:      newAuthorization(opts),
		starts:    admission.NewLimiter[nostr.PubKey](opts.SessionRate, opts.SessionBurst),
		replay:    newReplayGuard(opts.Freshness, 0),
		window:    opts.Freshness,

		routerCalls: make(chan func(context.Context)),
	}
	s.replicas = solo{&Host{s}}
	s.knownStarts = admission.NewLimiter[nostr.PubKey](opts.SessionRate, opts.SessionBurst)
	policy := admission.Policy{Max: opts.MaxSessions, Grace: opts.SessionGrace}
	if s.auth.allowed != nil {
		policy.Reserve = admission.ResolveReserve(opts.SessionReserve, opts.MaxSessions)
	}
	s.sessions = newSessionTable(policy, s.auth.known)
	s.transfers = newReassembler(opts.Transfers, func(k transferKey) {
		s.sendFrame(k.peer, abortFrame(k.token, "transfer timed out"), 0)
	})
	s.transfers.classify = s.auth.transferClass
	return s
}

// PublicKey is the server's identity.
func (s *Server) PublicKey() nostr.PubKey { return s.me }

// State is the store the server keeps what must survive it in:
// ServerOptions.State, or, in a replica group given none, the group's
// bucket in NATS. Another transport of the same server (the HTTP endpoint
// of cvm gateway) keeps its replay guard and payments there too, so that
// they hold across the group.
func (s *Server) State() durable.Store { return s.opts.State }

// Replicas is the server's Coordinator (ServerOptions.Replicas), nil for a
// server that is no replica.
func (s *Server) Replicas() Coordinator { return s.opts.Replicas }

// Relays are the relays the server listens on.
func (s *Server) Relays() []string { return s.pool.Relays() }

// Sessions is the number of client sessions in service (not counting
// retired ones still answering their last requests).
func (s *Server) Sessions() int { return s.sessions.len() }

// Accept waits for the next client session.
func (s *Server) Accept(ctx context.Context) (*ServerConn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.closed:
		return nil, ErrServerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Serve connects every client session to srv until ctx ends or the server
// is closed. It returns ErrServerClosed after Close.
func (s *Server) Serve(ctx context.Context, srv *mcp.Server) error {
	if s.opts.Announce {
		if !s.intake.Go(func(life context.Context) { s.announceServer(ctx, life, srv) }) {
			return ErrServerClosed
		}
	}
	for {
		c, err := s.Accept(ctx)
		if err != nil {
			return err
		}
		if _, err := srv.Connect(context.WithoutCancel(ctx), c.Transport(), nil); err != nil {
			s.log.Warn("mcp server refused a session", "client", c.client.Hex(), "err", err)
			c.Close()
		}
	}
}

// unannounceTimeout bounds the deletion of the announcements at Close.
const unannounceTimeout = 5 * time.Second

// Close stops listening, answers every request still in flight with an
// error, closes every session and returns once all of the server's work has
// ended: nothing it started runs, and no timer of it fires, after Close.
//
// In order: the intake stops (no event is routed, no announcement
// published); every session, retired ones included, answers what it has in
// flight, all at once; the announcements are deleted if so configured;
// then what is left (refusals, transfer frames) is cancelled and waited for.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.closed)
		if s.sub != nil {
			s.sub.Close() // ends the pipeline
		}
		s.intake.close()
		s.transfers.close()
		var wg sync.WaitGroup
		for _, c := range s.sessions.all() {
			wg.Go(func() { c.abort(transportError("server shutting down")) })
		}
		wg.Wait()
		if s.opts.UnannounceOnClose {
			ctx, cancel := context.WithTimeout(s.life.ctx, unannounceTimeout)
			if _, err := s.Unannounce(ctx); err != nil {
				s.log.Warn("could not delete the announcements", "err", err)
			}
			cancel()
		}
		s.life.close()
		if s.ownPool {
			s.pool.Close()
		}
		if s.announcePool != nil {
			s.announcePool.Close()
		}
	})
	return nil
}

// opened is one inbound event on its way through the pipeline: once a
// worker has opened it, the message event inside.
type opened struct {
	Inbound
	outer nostr.Event
	err   error
	ready chan struct{} // closed when the worker has opened it
}

// pipeline opens inbound events on Workers goroutines at once (unwrapping
// and verifying is what they cost) and routes them on one goroutine in the
// order they arrived: a client's messages, and the frames of a fragmented
// message, must take effect in the order the client sent them. Routing never
// waits on the network; answers it sends go out on their own goroutines.
// It returns, with its workers and router, when the subscription closes.
func (s *Server) pipeline() {
	ctx := s.intake.ctx
	jobs := make(chan *opened, s.opts.Workers)
	queue := make(chan *opened, 4*s.opts.Workers)
	var workers, router sync.WaitGroup
	for range s.opts.Workers {
		workers.Go(func() {
			for o := range jobs {
				o.evt, o.wrap, o.err = s.open(ctx, o.outer)
				close(o.ready)
			}
		})
	}
	router.Go(func() {
		for {
			select {
			case o, ok := <-queue:
				if !ok {
					return
				}
				<-o.ready
				s.routeOpened(o)
			case f := <-s.routerCalls:
				f(s.life.ctx)
			}
		}
	})
	defer func() {
		close(jobs)
		close(queue)
		workers.Wait()
		router.Wait()
	}()
	for {
		select {
		case evt, ok := <-s.sub.Events():
			if !ok {
				return
			}
			if evt.Kind != KindMessage {
				// A wrap replayed under the same outer id is refused before
				// paying for its decryption.
				if err := s.replay.admit(evt.ID, evt.CreatedAt, time.Now()); err != nil {
					s.log.Log(ctx, dropLevel(err), "dropping event", "id", evt.ID.Hex(), "err", err)
					continue
				}
			}
			o := &opened{Inbound: Inbound{s: s}, outer: evt, ready: make(chan struct{})}
			select {
			case jobs <- o:
			case <-s.closed:
				return
			}
			select {
			case queue <- o:
			case <-s.closed:
				return
			}
		case <-s.closed:
			return
		}
	}
}

func (s *Server) routeOpened(o *opened) {
	if o.err != nil {
		s.log.Info("dropping event", "id", o.outer.ID.Hex(), "kind", int(o.outer.Kind), "err", o.err)
		return
	}
	if err := o.Fresh(); err != nil {
		s.log.Info("dropping message", "id", o.evt.ID.Hex(), "client", o.evt.PubKey.Hex(), "err", err)
		return
	}
	// The claim is recorded before anything acts on the message, so that
	// it never runs twice.
	s.replicas.Route(s.life.ctx, &o.Inbound)
}

// refuseEvent answers every request the message event carries with refusal,
// and runs none of them.
func (s *Server) refuseEvent(inner nostr.Event, wrapKind nostr.Kind, refusal *jsonrpc.Error) {
	msgs, isBatch, err := DecodeContent(inner.Content)
	if err != nil {
		return
	}
	var b *batch
	if isBatch {
		b = newBatch(inner, wrapKind, msgs)
	}
	for i, msg := range msgs {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			s.refuse(inner, wrapKind, b, i, req, refusal)
		}
	}
}

// dispatch decodes the content of a message event (or of a reassembled
// transfer, whose inner is the end frame's event) and routes its messages.
func (s *Server) dispatch(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind) {
	msgs, isBatch, err := DecodeContent(inner.Content)
	if err != nil {
		s.log.Info("a message that is not JSON-RPC", "id", inner.ID.Hex(), "client", inner.PubKey.Hex(), "err", err)
		// Answered as JSON-RPC says (id null where none could be read),
		// correlated by the event, to an author the server serves; a
		// stranger learns nothing of a server that would not serve it.
		var ce *ContentError
		if errors.As(err, &ce) && s.auth.serves(inner.PubKey) {
			s.life.Go(func(ctx context.Context) { s.answerContent(ctx, inner, wrapKind, ce.answer()) })
		}
		return
	}
	var b *batch
	if isBatch {
		b = newBatch(inner, wrapKind, msgs)
	}
	if refusal := s.encryptionRefusal(wrapKind); refusal != nil {
		s.log.Info("refusing a message for its encryption", "client", inner.PubKey.Hex(), "encrypted", wrapKind != 0, "mode", s.opts.Encryption)
		for i, msg := range msgs {
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				s.refuse(inner, 0, b, i, req, refusal)
			}
		}
		return
	}
	for i, msg := range msgs {
		s.route(ctx, inner, wrapKind, b, i, msg)
	}
}

// encryptionRefusal says why a message in this form is not accepted, if it
// is not.
func (s *Server) encryptionRefusal(wrapKind nostr.Kind) *jsonrpc.Error {
	switch {
	case wrapKind == 0 && s.opts.Encryption == EncryptRequired:
		return &jsonrpc.Error{Code: CodeEncryptionRequired, Message: "this server requires encryption: send requests as NIP-44 gift wraps (CEP-4)"}
	case wrapKind != 0 && s.opts.Encryption == EncryptDisabled:
		return &jsonrpc.Error{Code: CodeEncryptionNotAccepted, Message: "this server has encryption disabled: send requests in plaintext"}
	}
	return nil
}

// route hands one message to the session it belongs to, after
// authorization. b is the batch it came in, nil if none, and i its index.
func (s *Server) route(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind, b *batch, i int, msg jsonrpc.Message) {
	client := inner.PubKey
	switch m := msg.(type) {
	case *jsonrpc.Response:
		ref, _ := firstTagValue(inner.Tags, "e")
		id, err := nostr.IDFromHex(ref)
		var c *ServerConn
		if err == nil {
			c, _ = s.outbound.take(id)
		}
		if c == nil || c.client != client {
			s.log.Info("dropping a response to no request of ours", "client", client.Hex(), "e", ref)
			return
		}
		if !c.deliver(m) {
			s.log.Warn("session inbox full; dropping a response", "session", c.id)
		}
	case *jsonrpc.Request:
		if err := s.auth.check(ctx, client, m); err != nil {
			s.log.Info("refused", "client", client.Hex(), "method", m.Method, "err", err)
			if m.IsCall() {
				s.refuse(inner, wrapKind, b, i, m, &jsonrpc.Error{Code: CodeUnauthorized, Message: err.Error()})
			}
			return
		}
		if m.Method == mcpmsg.MethodProgress && !m.IsCall() {
			if frame, ok, err := parseTransferFrame(m.Params); ok {
				s.receiveFrame(ctx, inner, wrapKind, frame, err)
				return
			}
			if frame, ok, err := parseStreamFrame(m.Params); ok {
				if c, _ := s.session(client, false); c != nil && err == nil {
					c.streamFrame(frame)
				} else {
					s.log.Info("dropping an open-stream frame", "client", client.Hex(), "err", err)
				}
				return
			}
		}
		var c *ServerConn
		var refusal *jsonrpc.Error
		if m.IsCall() && m.Method == mcpmsg.MethodInitialize {
			c, refusal = s.newSession(client, false)
			if refusal == nil {
				s.replicas.Initialized(ctx, client, m.Params, discoveryOnly(inner.Tags))
			}
		} else {
			c, refusal = s.session(client, m.IsCall())
		}
		if refusal != nil {
			s.refuse(inner, wrapKind, b, i, m, refusal)
			return
		}
		if c == nil {
			s.log.Info("dropping a notification from a client without a session", "client", client.Hex(), "method", m.Method)
			return
		}
		if !c.receive(inner, wrapKind, b, i, m) {
			// The session closed between its lookup and now: it could not
			// start (a gateway refused it, and says why), or it ended.
			refusal := c.failure()
			if refusal == nil {
				refusal = &jsonrpc.Error{Code: CodeServerBusy, Message: busyMessage}
			}
			s.refuse(inner, wrapKind, b, i, m, refusal)
		}
	}
}

// session returns the client's current session; with create, a client
// without one gets a stateless session, or the refusal newSession gives.
func (s *Server) session(client nostr.PubKey, create bool) (*ServerConn, *jsonrpc.Error) {
	if c := s.sessions.get(client); c != nil || !create {
		return c, nil
	}
	return s.replicas.Session(s.life.ctx, client)
}

// newSession starts a session for client, replacing its current one, or
// refuses to (with CodeServerBusy and when to retry) when the client
// starts sessions too fast, or when all the sessions it may take
// (MaxSessions, less SessionReserve for a client outside AllowedClients)
// are taken and none may give way. The sessions replaced keep answering what they have in flight,
// then close.
func (s *Server) newSession(client nostr.PubKey, stateless bool) (*ServerConn, *jsonrpc.Error) {
	now := time.Now()
	starts := s.starts
	if s.auth.known(client) {
		starts = s.knownStarts
	}
	if ok, retry := starts.Allow(client, now); !ok {
		s.log.Info("refusing a new session: too many new sessions", "client", client.Hex(), "retry_after", retry)
		return nil, BusyError("server busy: too many new sessions; retry later", retry)
	}
	c, retired, retry, err := s.sessions.start(client, now, func(n uint64) *ServerConn {
		return newServerConn(s, client, fmt.Sprintf("%s-%d", client.Hex()[:12], n))
	})
	if err != nil {
		n := s.opts.MaxSessions
		if errors.Is(err, errStrangerFull) {
			n -= s.sessions.policy.Reserve
		}
		s.log.Info("refusing a new session: all sessions taken", "client", client.Hex(), "max", n, "retry_after", retry)
		return nil, BusyError(fmt.Sprintf("server busy: all %d sessions are in use (%v); retry later", n, err), retry)
	}
	for _, old := range retired {
		old.retire()
	}
	if stateless {
		c.initializeForClient()
	}
	select {
	case s.accepted <- c:
	case <-s.closed:
	}
	return c, nil
}

// forget removes a closing session from the server's books.
func (s *Server) forget(c *ServerConn) {
	s.sessions.remove(c)
	s.outbound.deleteFunc(func(_ nostr.ID, oc *ServerConn) bool { return oc == c })
}

// closeLater closes c on a goroutine of the server: the session's own work
// must never wait for the session's Close, which waits for it. Once the
// server is closing, its Close closes c.
func (s *Server) closeLater(c *ServerConn) {
	s.life.Go(func(context.Context) { c.Close() })
}

func (s *Server) reapIdle() {
	interval := min(max(s.opts.IdleTimeout/4, 100*time.Millisecond), time.Minute)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case now := <-t.C:
			for _, c := range s.sessions.idle(now, s.opts.IdleTimeout) {
				s.log.Debug("closing idle session", "session", c.id)
				c.Close()
			}
		}
	}
}

// refuse answers a request the server will not process, in plaintext or in
// a wrap of wrapKind, on a goroutine of the server; inside a batch, the
// answer joins the batch's.
func (s *Server) refuse(inner nostr.Event, wrapKind nostr.Kind, b *batch, i int, req *jsonrpc.Request, refusal *jsonrpc.Error) {
	if req == nil || !req.IsCall() {
		return
	}
	s.life.Go(func(ctx context.Context) { s.refuseNow(ctx, inner, wrapKind, b, i, req, refusal) })
}

func (s *Server) refuseNow(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind, b *batch, i int, req *jsonrpc.Request, refusal *jsonrpc.Error) {
	if b == nil {
		defer s.replicas.Answered(ctx, inner.ID, true)
	}
	resp := &jsonrpc.Response{ID: req.ID, Error: refusal}
	if b != nil {
		if content, done := b.answer(i, resp); done {
			defer s.replicas.Answered(ctx, b.eventID, true) // the whole batch is answered
			s.sendBatch(ctx, inner.PubKey, b, content, nil)
		}
		return
	}
	content, err := EncodeContent(resp)
	if err != nil {
		return
	}
	tags := nostr.Tags{{"p", inner.PubKey.Hex()}, {"e", inner.ID.Hex()}}
	if _, err := s.reply(ctx, inner.PubKey, content, tags, wrapKind); err != nil {
		s.log.Info("could not deliver a refusal", "client", inner.PubKey.Hex(), "err", err)
	}
}

// answerContent publishes resp, the answer to the message event inner as a
// whole.
func (s *Server) answerContent(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind, resp *jsonrpc.Response) {
	content, err := encodeErrorAnswer(resp)
	if err != nil {
		s.log.Error("could not encode an error answer", "client", inner.PubKey.Hex(), "err", err)
		return
	}
	tags := nostr.Tags{{"p", inner.PubKey.Hex()}, {"e", inner.ID.Hex()}}
	if _, err := s.reply(ctx, inner.PubKey, content, tags, wrapKind); err != nil {
		s.log.Info("could not deliver an error answer", "client", inner.PubKey.Hex(), "err", err)
	}
}

// sendBatch publishes the answer to a whole batch as one event.
func (s *Server) sendBatch(ctx context.Context, client nostr.PubKey, b *batch, content string, extra nostr.Tags) {
	if content == "" {
		return // a batch of notifications gets no answer
	}
	tags := append(nostr.Tags{{"p", client.Hex()}, {"e", b.eventID.Hex()}}, extra...)
	if _, err := s.reply(ctx, client, content, tags, s.answerWrap(b.wrapKind)); err != nil {
		s.log.Warn("batch response not delivered", "client", client.Hex(), "err", err)
	}
}

// answerWrap is the wrap of an answer, in the server's own name rather than
// a session's, to a message that came in wrap (0: plaintext): the same,
// unless the server's encryption mode says otherwise.
func (s *Server) answerWrap(wrap nostr.Kind) nostr.Kind {
	switch {
	case s.opts.Encryption == EncryptDisabled:
		return 0
	case wrap == 0 && s.opts.Encryption == EncryptRequired:
		return KindGiftWrap
	}
	return wrap
}

// receiveFrame handles one CEP-22 frame of a client's fragmented message.
func (s *Server) receiveFrame(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind, p progressFrame, err error) {
	client := inner.PubKey
	if err != nil {
		s.log.Info("dropping a malformed transfer frame", "client", client.Hex(), "err", err)
		return
	}
	if s.opts.OversizedThreshold < 0 {
		s.sendFrame(client, abortFrame(p.ProgressToken, "this server does not accept oversized transfers"), wrapKind)
		return
	}
	if p.CVM.FrameType == "end" && !s.transfers.has(client, p.ProgressToken) {
		// Nothing to complete, so the request never ran: said now, the
		// client need not wait for its timeout. The start frame never came
		// (or the transfer was aborted, or timed out, which the client has
		// been told already); in a replica group, the transfer began on
		// another replica, lost since (or, during a membership change,
		// still alive), and this replica holds its end frame's claim.
		reason := "no transfer in progress on this token (its start never arrived, or it was aborted or timed out); the request did not run: send it again"
		if r, ok := s.replicas.(transferOrphans); ok {
			reason = r.MissingStart()
		}
		s.log.Info("aborting the end of a transfer never started here", "client", client.Hex(), "reason", reason)
		s.sendFrame(client, abortFrame(p.ProgressToken, reason), wrapKind)
		return
	}
	assembled, startTags, done, err := s.transfers.frame(client, p, inner.Tags)
	switch {
	case err != nil && errors.Is(err, ErrTransferAborted):
		s.log.Info("client aborted a transfer", "client", client.Hex(), "err", err)
	case err != nil:
		s.log.Warn("aborting a client's transfer", "client", client.Hex(), "err", err)
		s.sendFrame(client, abortFrame(p.ProgressToken, err.Error()), wrapKind)
	case p.CVM.FrameType == "start":
		// A client waits for accept until it knows the server supports
		// transfers, which it learns from the server's discovery tags. It
		// has not heard them when its key has no session here, when the
		// session has not sent them yet, or when the start frame carries
		// the client's own discovery tags, which a client sends before it
		// has heard the server's (observe then owes them again): a
		// stateless client, or another process under the key of a session.
		c, _ := s.session(client, false)
		if c != nil {
			c.observe(inner, wrapKind)
		}
		if c == nil || !c.toldDiscovery() {
			s.sendFrame(client, acceptFrame(p.ProgressToken), wrapKind)
		}
	case done:
		// The reassembled message is answered as the end frame's event, and
		// carries the discovery tags its start frame came with.
		synthetic := inner
		synthetic.Content = assembled
		synthetic.Tags = append(slices.Clone(inner.Tags), discoveryOnly(startTags)...)
		s.replicas.Assembled(ctx, &Inbound{s: s, evt: synthetic, wrap: wrapKind})
	}
}

// sendFrame sends a transfer control frame (accept, abort) to client, on a
// goroutine of the server.
func (s *Server) sendFrame(client nostr.PubKey, frame *jsonrpc.Request, wrapKind nostr.Kind) {
	s.life.Go(func(ctx context.Context) { s.sendFrameNow(ctx, client, frame, wrapKind) })
}

func (s *Server) sendFrameNow(ctx context.Context, client nostr.PubKey, frame *jsonrpc.Request, wrapKind nostr.Kind) {
	content, err := EncodeContent(frame)
	if err != nil {
		return
	}
	switch s.opts.Encryption {
	case EncryptDisabled:
		wrapKind = 0
	case EncryptRequired:
		if wrapKind == 0 {
			wrapKind = KindGiftWrap
		}
	}
	if _, err := s.reply(ctx, client, content, nostr.Tags{{"p", client.Hex()}}, wrapKind); err != nil {
		s.log.Info("transfer frame not delivered", "client", client.Hex(), "err", err)
	}
}

// discoveryOnly keeps the discovery tags of tags.
func discoveryOnly(tags nostr.Tags) nostr.Tags {
	var out nostr.Tags
	for _, t := range tags {
		if len(t) > 0 && discoveryTagNames[t[0]] {
			out = append(out, t)
		}
	}
	return out
}
