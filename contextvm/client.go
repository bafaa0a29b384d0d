package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrServerNotListening is the cause of a request that every relay accepted
// as valid but nobody was subscribed to: the server is not running, or not
// on these relays.
var ErrServerNotListening = errors.New("server is not listening on any relay")

// ErrClientIsServer is returned by Connect when the client's key is the
// server's own: ContextVM cannot tell such a client's messages from the
// server's.
var ErrClientIsServer = errors.New("contextvm: the client's key is the server's own; a client needs a key of its own")

// ClientOptions configure a ClientTransport.
type ClientOptions struct {
	// Server is the server's public key: hex, npub or nprofile. An
	// nprofile's relay hints are added to Relays.
	Server string

	// Relays to talk through. Ignored when Pool is set.
	Relays []string
	// Pool, if set, is used instead of a pool of the transport's own; the
	// caller keeps ownership and closes it.
	Pool *nostrx.Pool

	// Signer is the client's identity. Nil means a throwaway key.
	Signer Signer

	Encryption EncryptionMode
	GiftWrap   GiftWrapMode

	// RequestTimeout fails a request with no response after this long
	// (default 60 s, MCP's usual). Each progress notification for the request
	// restarts the clock. Negative means never.
	RequestTimeout time.Duration

	// Stateless answers initialize locally and sends the client's discovery
	// tags with its first real request instead (CEP-35): one round trip
	// fewer, no server session state.
	Stateless bool

	// PlaintextFallback is how long, in optional encryption mode, a request
	// waits for an answer before the client asks itself whether the server
	// reads the form it went in (default 3 s; negative disables). The
	// reference drops what its encryption mode refuses without a word. A
	// request safe to repeat (initialize, ping, lists, reads), sent
	// gift-wrapped to a server nothing is known of, then goes once more in
	// plaintext: how an optional client reaches a server with encryption
	// disabled at first contact. Otherwise, unless the server has answered
	// in that form already, the client pings it in both forms, and sends the
	// request again in the other form only when the server answers that
	// form's ping and not the first: it dropped the request unopened, so
	// whatever the method, a tools/call too, it ran nothing. A server that
	// answers the ping is slow, and is left to answer. To a server known to
	// read gift wraps the plaintext ping goes only after as long again.
	PlaintextFallback time.Duration

	// KnownEncryption is what the caller knows of the server's encryption
	// from before this connection: its announcement, or what an earlier
	// connection learned (ClientTransport.ServerEncryption), as cvm's
	// one-shot commands remember it. In optional mode it decides the form of
	// the first request without AnnouncementLookup, and a server known to
	// read gift wraps is not sent a request again in plaintext because it is
	// slow to answer. Knowledge out of date costs a probe, not the request
	// (see PlaintextFallback).
	KnownEncryption ServerEncryption

	// OversizedThreshold is the size of a published event above which a
	// message is sent as CEP-22 fragments (default DefaultOversizedThreshold,
	// the reference's 48,000 bytes; negative turns fragmentation off).
	// Transfers bound the fragmented answers the client reassembles.
	OversizedThreshold int
	Transfers          TransferLimits

	// OpenStreams says the client reads CEP-41 open streams (see
	// ClientTransport.OpenStream); Streams bounds them. Off by default, as
	// in the reference.
	OpenStreams bool
	Streams     StreamLimits

	// Freshness is how far from now an event's created_at may be (default
	// DefaultFreshness); within it each event is processed once.
	Freshness time.Duration

	// Payer makes the client pay for priced requests (CEP-8; package
	// contextvm/cep8); nil pays nothing, and fails such requests at once.
	Payer Payer

	// AnnouncementLookup bounds the wait, in optional mode, for the server's
	// announcement, which says whether it supports encryption (default 1 s;
	// negative skips the lookup, as does a KnownEncryption).
	AnnouncementLookup time.Duration

	Logger *slog.Logger
}

// ClientTransport is an mcp.Transport to a ContextVM server, for any go-sdk
// mcp.Client. Use Connect, or pass it to mcp.Client.Connect with
// ClientSessionOptions{ProtocolVersion: ProtocolVersion}.
//
// The go-sdk client's default protocol (2026-07-28) starts with a
// server/discover probe that ContextVM peers do not know; the transport
// answers that probe itself with "method not found", which makes the client
// fall back to initialize, so it never reaches the network.
type ClientTransport struct {
	opts   ClientOptions
	server nostrx.PublicKey

	mu   sync.Mutex
	conn *clientConn // once connected
}

// NewClientTransport checks opts and returns a transport. It connects
// nothing until Connect.
func NewClientTransport(opts ClientOptions) (*ClientTransport, error) {
	server, err := nostrx.ParsePublicKey(opts.Server)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if opts.Pool == nil && len(opts.Relays)+len(server.Relays) == 0 {
		return nil, fmt.Errorf("no relays: give at least one relay URL")
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	if opts.PlaintextFallback == 0 {
		opts.PlaintextFallback = 3 * time.Second
	}
	if opts.AnnouncementLookup == 0 {
		opts.AnnouncementLookup = time.Second
	}
	if opts.OversizedThreshold == 0 {
		opts.OversizedThreshold = DefaultOversizedThreshold
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &ClientTransport{opts: opts, server: server}, nil
}

// Connect dials the relays, subscribes for the server's answers and returns
// the connection once the subscription is live on at least one relay
// (earlier, answers could be missed). It is called once, by mcp.Client.
func (t *ClientTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	signer := t.opts.Signer
	if signer == nil {
		signer = NewKeySigner(nostr.Generate())
	}
	me, err := signer.GetPublicKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	if me == t.server.Key {
		// Both would listen on the same #p: the client would read its own
		// requests as the server's, and the server would answer itself.
		return nil, ErrClientIsServer
	}
	var pool relayPool = t.opts.Pool
	ownPool := t.opts.Pool == nil
	if ownPool {
		relays := append(slices.Clone(t.opts.Relays), t.server.Relays...)
		pool = nostrx.NewPool(nostrx.PoolOptions{Relays: relays, Signer: signer, Logger: t.opts.Logger})
	}
	c := newClientConn(t.opts, endpoint{pool: pool, signer: signer, me: me, log: t.opts.Logger.With("server", t.server.Key.Hex()[:12])}, t.server.Key)
	c.ownPool = ownPool
	// Stored wraps from a little before now, so that a server whose clock
	// is behind ours is still heard; stale answers have no pending request
	// and are dropped.
	since := nostr.Now() - 10
	c.sub = pool.SubscribeFilters(t.opts.GiftWrap.inboxFilters(me, since), 0)

	if t.opts.Encryption == EncryptOptional && t.opts.AnnouncementLookup > 0 && t.opts.KnownEncryption == EncryptionUnknown {
		// Under the connection's lifetime, not Connect's ctx: the lookup
		// outlives Connect, whose caller may cancel ctx once it returns.
		c.life.Go(func(ctx context.Context) {
			defer close(c.announcement)
			c.lookupAnnouncement(ctx)
		})
	} else {
		close(c.announcement)
	}

	select {
	case <-c.sub.Ready():
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("contextvm: no relay answered the subscription: %w", context.Cause(ctx))
	}
	c.life.Go(func(context.Context) { c.readLoop() })
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return c, nil
}

// OpenStream prepares to read the CEP-41 stream a server opens for the
// request that carries progress token (a string or a number); call it before
// sending the request. The transport must be connected and have OpenStreams
// set; once its connection has closed, OpenStream fails with
// mcp.ErrConnectionClosed, and closing it ends the readers it opened.
func (t *ClientTransport) OpenStream(token any) (*StreamReader, error) {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	switch {
	case !t.opts.OpenStreams:
		return nil, fmt.Errorf("%w: ClientOptions.OpenStreams is off", ErrStreamsUnsupported)
	case c == nil:
		return nil, errors.New("contextvm: the transport is not connected")
	case token == nil:
		return nil, fmt.Errorf("%w: a stream needs a progress token", ErrStreamsUnsupported)
	}
	tok, err := mcpmsg.TokenOf(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamsUnsupported, err)
	}
	return c.openStream(tok)
}

// Prices returns the prices the server stated on its answers to list
// requests (tools/list and the like: CEP-8 puts its cap tags on every one),
// sorted by capability. A price whose tag named the capability but whose
// amount could not be read is returned as written: Validate refuses it, and
// it means the price is unknown, not that the capability is free. A
// capability with no price here was listed free, or not listed yet.
func (t *ClientTransport) Prices() []Price {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.view.knownPrices()
}

// KnowPrices tells the transport prices the client learned elsewhere:
// the server's announcement, or a list answer of an earlier connection
// that a cache kept. A payment's offer and the Payer (PaidCall.Price)
// read them as if the server had stated them on this connection; a price
// it does state on a list answer replaces them. Call it once connected.
func (t *ClientTransport) KnowPrices(prices []Price) {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.view.learnPrices(priceTags(prices), "")
	}
}

// listedKind is the kind of capability each list request lists.
var listedKind = map[string]string{
	"tools/list":               "tool",
	"resources/list":           "resource",
	"resources/templates/list": "resource",
	"prompts/list":             "prompt",
}

// ServerSupport is what a server said it supports in the discovery tags of
// its messages (CEP-35): Known is false until a message of the current
// session carried them (in stateless mode, until the first answer).
type ServerSupport struct {
	Known             bool
	Encryption        bool
	EphemeralGiftWrap bool
	OversizedTransfer bool // CEP-22
	OpenStreams       bool // CEP-41
	// PMIs are the payment methods of the server's pmi tags (CEP-8), in
	// its order of preference, as it sent them.
	PMIs []string
}

// ServerSupport reports what the server has said of itself in this
// connection's current session; the zero value before Connect.
func (t *ClientTransport) ServerSupport() ServerSupport {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return ServerSupport{}
	}
	v := &c.view
	v.mu.Lock()
	defer v.mu.Unlock()
	return ServerSupport{Known: v.caps.known, Encryption: v.caps.encryption, EphemeralGiftWrap: v.caps.ephemeral, OversizedTransfer: v.caps.oversized, OpenStreams: v.caps.openStream, PMIs: slices.Clone(v.caps.pmis)}
}

// ServerEncryption reports what the connection knows of whether the server
// reads gift wraps: what the server's answers showed (discovery tags, the
// form it answered in, a refusal, a probe), else what KnownEncryption or
// its announcement said; EncryptionUnknown before Connect. A caller that
// connects again later may pass it as KnownEncryption.
func (t *ClientTransport) ServerEncryption() ServerEncryption {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return EncryptionUnknown
	}
	return c.view.encryption()
}

// Connect connects client to the ContextVM server of opts and performs the
// MCP handshake at ProtocolVersion.
func Connect(ctx context.Context, client *mcp.Client, opts ClientOptions) (*mcp.ClientSession, error) {
	t, err := NewClientTransport(opts)
	if err != nil {
		return nil, err
	}
	return client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
}

// clientConn is the mcp.Connection of a ClientTransport.
//
// Its state is kept by small owners, each with its own lock: the requests
// in flight (pending), what it knows of the server (view), the server's
// requests it owes an answer (inbound), its transfers waiting for the
// server's accept (accepts), the streams it reads (streams) and the
// transfers it reassembles (transfers). Everything it does in the
// background (the read loop, request timeouts, plaintext fallbacks, stream
// probes, aborts) is work of its lifetime: Close cancels it and returns
// once it has all ended.
type clientConn struct {
	endpoint
	opts    ClientOptions
	server  nostr.PubKey
	ownPool bool
	sub     *nostrx.Subscription

	life      *lifetime
	incoming  chan jsonrpc.Message
	closed    chan struct{}
	closeOnce sync.Once

	// announcement is closed when the announcement lookup is over.
	announcement chan struct{}
	// probes are the pings it sent to learn which form the server reads
	// (encryption.go), by event id.
	probes registry[nostr.ID, *probePing]

	view      serverView
	pending   pendingTable
	inbound   registry[jsonrpc.ID, nostr.ID]        // server requests awaiting our answer: JSON-RPC id -> event id
	accepts   registry[mcpmsg.Token, chan struct{}] // outbound transfers waiting for the server's accept
	streams   registry[mcpmsg.Token, *StreamReader] // open streams being read
	replay    *replayGuard
	transfers *reassembler
}

// newClientConn makes a connection that has not subscribed yet.
func newClientConn(opts ClientOptions, e endpoint, server nostr.PubKey) *clientConn {
	c := &clientConn{
		endpoint:     e,
		opts:         opts,
		server:       server,
		life:         newLifetime(context.Background()),
		incoming:     make(chan jsonrpc.Message, 64),
		closed:       make(chan struct{}),
		announcement: make(chan struct{}),
		replay:       newReplayGuard(opts.Freshness, 0),
	}
	c.view.enc = opts.KnownEncryption
	c.transfers = newReassembler(opts.Transfers, func(k transferKey) {
		c.life.Go(func(ctx context.Context) { c.abortTransfer(ctx, k.token, "transfer timed out") })
	})
	return c
}

func (c *clientConn) SessionID() string { return "" }

func (c *clientConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.closed:
		return nil, mcp.ErrConnectionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the connection: it stops every timer, ends the streams being
// read (with mcp.ErrConnectionClosed), cancels what is under way and
// returns once all of the connection's work has returned. Requests still in
// flight are the go-sdk's to fail.
func (c *clientConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.life.stop()
		c.pending.stopAll()
		c.transfers.close()
		for _, r := range c.streams.drain() {
			r.end(mcp.ErrConnectionClosed)
		}
		if c.sub != nil {
			c.sub.Close() // ends the read loop
		}
		c.life.close()
		if c.ownPool {
			c.pool.Close()
		}
	})
	return nil
}

// deliver hands a message to the go-sdk client.
func (c *clientConn) deliver(msg jsonrpc.Message) {
	select {
	case c.incoming <- msg:
	case <-c.closed:
	}
}

// fail answers a pending request locally with an error.
func (c *clientConn) fail(id jsonrpc.ID, code int64, msg string) {
	c.deliver(mcpmsg.ErrorResponse(id, code, "%s", msg))
}

// Write sends msg to the server. A Write under way when Close is called is
// cancelled, and Close waits for it; after Close, Write fails with
// mcp.ErrConnectionClosed.
func (c *clientConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if !c.life.enter() {
		return mcp.ErrConnectionClosed
	}
	defer c.life.leave()
	ctx, cancel := c.life.join(ctx)
	defer cancel()
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if !m.IsCall() {
			return c.writeNotification(ctx, m)
		}
		switch m.Method {
		case "server/discover":
			// See ClientTransport: answered here so it never reaches a peer.
			c.fail(m.ID, jsonrpc.CodeMethodNotFound, "server/discover is not supported over ContextVM")
			return nil
		case mcpmsg.MethodInitialize:
			c.view.newSession()
			if c.opts.Stateless {
				c.deliver(statelessInitializeResult(m))
				return nil
			}
		}
		c.writeRequest(ctx, m)
		return nil
	case *jsonrpc.Response:
		eventID, ok := c.inbound.take(m.ID)
		tags := nostr.Tags{{"p", c.server.Hex()}}
		if ok {
			tags = append(tags, nostr.Tag{"e", eventID.Hex()})
		} else {
			c.log.Warn("answering a server request this connection never received", "id", m.ID.Raw())
		}
		content, err := EncodeContent(m)
		if err != nil {
			return err
		}
		if _, err := c.send(ctx, c.server, content, tags, c.wrapKind()); err != nil {
			c.log.Warn("could not deliver a response to the server", "id", m.ID.Raw(), "err", err)
		}
		return nil
	default:
		return fmt.Errorf("contextvm: unknown message type %T", msg)
	}
}

func (c *clientConn) writeNotification(ctx context.Context, m *jsonrpc.Request) error {
	if c.opts.Stateless && m.Method == mcpmsg.MethodInitialized {
		return nil // the server never saw an initialize
	}
	content, err := EncodeContent(m)
	if err != nil {
		return err
	}
	if _, err := c.send(ctx, c.server, content, nostr.Tags{{"p", c.server.Hex()}}, c.wrapKind()); err != nil {
		// A lost notification must not end the session; say so and go on.
		// One that Close cut short was given up by the caller: no news.
		level := slog.LevelWarn
		if ctx.Err() != nil && c.life.stopping() {
			level = slog.LevelDebug
		}
		c.log.Log(ctx, level, "notification not delivered", "method", m.Method, "err", err)
	}
	return nil
}

// wrapKind is the gift-wrap kind of the next message, 0 for plaintext.
func (c *clientConn) wrapKind() nostr.Kind {
	return c.view.wrapKind(c.opts.Encryption, c.opts.GiftWrap)
}

// writeRequest sends a request and tracks it until its answer, a timeout or
// a delivery failure, each of which reaches the go-sdk client as a response.
func (c *clientConn) writeRequest(ctx context.Context, m *jsonrpc.Request) {
	<-c.announcement
	p := &pendingRequest{req: m, wire: m}
	p.token, _ = mcpmsg.ProgressToken(m)
	if p.token.IsZero() && c.fragmenting() && m.Method != mcpmsg.MethodInitialize {
		// CEP-22 fragments travel on a progress token: a request without one
		// could neither be sent in fragments nor answered in them.
		tok := newProgressToken()
		if wire, err := mcpmsg.WithProgressToken(m, tok); err == nil {
			p.wire, p.token = wire, tok
		}
	}
	content, err := EncodeContent(p.wire)
	if err != nil {
		c.fail(m.ID, CodeTransportError, err.Error())
		return
	}
	tags := nostr.Tags{{"p", c.server.Hex()}}
	if c.view.takeDiscovery() {
		tags = append(tags, capabilityTags(c.opts.Encryption, c.opts.GiftWrap, c.fragmenting(), c.opts.OpenStreams)...)
		tags = append(tags, c.paymentTags(p, true)...)
	} else {
		tags = append(tags, c.paymentTags(p, false)...)
	}
	wrapKind := c.wrapKind()
	oversized := c.fragmenting() && finalSize(content, tags, wrapKind) > c.opts.OversizedThreshold
	p.wrapped, p.tags = wrapKind != 0, tags
	p.switchable = !oversized && c.opts.Encryption == EncryptOptional
	watchSilence := p.switchable && c.opts.PlaintextFallback > 0
	serverKnowsCEP22 := c.view.oversized()
	c.pending.add(p, func(p *pendingRequest) {
		if c.opts.RequestTimeout > 0 {
			p.timer = c.life.AfterFunc(c.opts.RequestTimeout, func(context.Context) { c.expire(p) })
		}
		if watchSilence {
			p.fallback = c.life.AfterFunc(c.opts.PlaintextFallback, func(ctx context.Context) { c.onSilence(ctx, p) })
		}
	})

	if oversized {
		c.writeFragmented(ctx, p, content, tags, wrapKind, serverKnowsCEP22)
		return
	}
	evt, err := c.sendTracked(ctx, p, content, tags, wrapKind)
	switch {
	case err == nil:
	case errors.Is(err, nostrx.ErrUnheard):
		// Valid, unheard: retrying does not help, but the answer may still
		// come through a relay the server joins later. Fail at the deadline.
		p.unheard.Store(true)
		c.log.Debug("request unheard by every relay", "method", m.Method, "event", evt.ID.Hex())
	default:
		if c.pending.remove(p) {
			c.fail(m.ID, CodeTransportError, fmt.Sprintf("contextvm: %s not delivered: %v", m.Method, err))
		}
	}
}

// fragmenting reports whether this client sends and receives CEP-22 transfers.
func (c *clientConn) fragmenting() bool { return c.opts.OversizedThreshold > 0 }

// writeFragmented sends a request too large for one event as CEP-22
// frames. A server that has not advertised support must accept first.
func (c *clientConn) writeFragmented(ctx context.Context, p *pendingRequest, content string, startTags nostr.Tags, wrapKind nostr.Kind, serverKnows bool) {
	var waitAccept func(context.Context) error
	if !serverKnows {
		accepted := make(chan struct{})
		c.accepts.put(p.token, accepted)
		defer c.accepts.deleteIf(p.token, accepted)
		timeout := min(30*time.Second, max(c.opts.RequestTimeout, time.Second))
		waitAccept = func(ctx context.Context) error {
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case <-accepted:
				return nil
			case <-t.C:
				return fmt.Errorf("%w: no accept within %s for a request of %d bytes (one event holds %d)",
					ErrNoOversizedSupport, timeout, len(content), c.opts.OversizedThreshold)
			case <-c.closed:
				return mcp.ErrConnectionClosed
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	tags := func() nostr.Tags { return nostr.Tags{{"p", c.server.Hex()}} }
	err := c.sendFragmented(ctx, c.server, content, p.token, func() nostr.Tags { return startTags }, tags, wrapKind,
		c.opts.OversizedThreshold, waitAccept, func(end nostr.Event) {
			// The server answers the request the end frame completes.
			c.pending.addEvent(p, end.ID)
		})
	if err != nil && !errors.Is(err, nostrx.ErrUnheard) && c.pending.remove(p) {
		code := int64(CodeTransportError)
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNoOversizedSupport) {
			code = CodeResponseTooLarge
		}
		c.fail(p.req.ID, code, fmt.Sprintf("contextvm: %s (%d bytes) not delivered in fragments: %v", p.req.Method, len(content), err))
	}
}

// abortTimeout bounds the publishing of an abort frame: it is a courtesy
// to the server, which gives up the transfer on its own timeout anyway.
const abortTimeout = 5 * time.Second

// abortTransfer tells the server to give up a transfer with token, and
// fails the request it belonged to.
func (c *clientConn) abortTransfer(ctx context.Context, token mcpmsg.Token, reason string) {
	content, err := EncodeContent(abortFrame(token, reason))
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, abortTimeout)
		c.send(ctx, c.server, content, nostr.Tags{{"p", c.server.Hex()}}, c.wrapKind())
		cancel()
	}
	c.failByToken(token, fmt.Sprintf("contextvm: the fragmented answer was aborted: %s", reason))
}

// failByToken fails the pending request that asked for progress with token.
func (c *clientConn) failByToken(token mcpmsg.Token, msg string) {
	for _, p := range c.pending.withToken(token) {
		if c.pending.remove(p) {
			c.fail(p.req.ID, CodeTransportError, msg)
			return
		}
	}
}

// sendTracked publishes one copy of a pending request, registering its event
// id before the answer can possibly arrive.
func (c *clientConn) sendTracked(ctx context.Context, p *pendingRequest, content string, tags nostr.Tags, wrapKind nostr.Kind) (nostr.Event, error) {
	evt, out, err := c.seal(ctx, c.server, content, tags, wrapKind)
	if err != nil {
		return evt, err
	}
	c.pending.addEvent(p, evt.ID)
	return evt, c.pool.Publish(ctx, out)
}

func (c *clientConn) expire(p *pendingRequest) {
	if !c.pending.remove(p) {
		return
	}
	if resp := c.pending.heldReplicaError(p); resp != nil {
		c.answer(p, resp) // what the group said is more than "no answer"
		return
	}
	msg := fmt.Sprintf("contextvm: %s: no answer from %s within %s (%s)", p.req.Method, nostrx.EncodeNpub(c.server), c.opts.RequestTimeout, p.sentAs())
	if p.unheard.Load() {
		msg = fmt.Sprintf("contextvm: %s: %v (server %s): every relay accepted the request but nobody was subscribed to it",
			p.req.Method, ErrServerNotListening, nostrx.EncodeNpub(c.server))
	}
	c.endStream(p, msg)
	c.fail(p.req.ID, CodeRequestTimeout, msg)
}

// repeatable reports whether sending a request twice is harmless, so that the
// plaintext fallback may repeat it.
func repeatable(method string) bool {
	switch method {
	case mcpmsg.MethodInitialize, mcpmsg.MethodPing, "tools/list", "resources/list", "resources/templates/list",
		"prompts/list", "resources/read", "prompts/get", "completion/complete":
		return true
	}
	return false
}

func (c *clientConn) readLoop() {
	for evt := range c.sub.Events() {
		c.handle(evt)
	}
}

func (c *clientConn) handle(evt nostr.Event) {
	ctx := c.life.ctx
	now := time.Now()
	if evt.Kind != KindMessage {
		if err := c.replay.admit(evt.ID, evt.CreatedAt, now); err != nil {
			c.log.Log(ctx, dropLevel(err), "dropping event", "id", evt.ID.Hex(), "err", err)
			return
		}
	}
	inner, wrapKind, err := c.open(ctx, evt)
	if err != nil {
		// With relays that ignore tag filters, others' wraps arrive here too.
		c.log.Debug("ignoring event", "id", evt.ID.Hex(), "err", err)
		return
	}
	if inner.PubKey != c.server {
		c.log.Debug("ignoring a message from another key", "author", inner.PubKey.Hex())
		return
	}
	if err := c.replay.admit(inner.ID, inner.CreatedAt, now); err != nil {
		c.log.Log(ctx, dropLevel(err), "dropping message", "id", inner.ID.Hex(), "err", err)
		return
	}
	c.view.learn(inner.Tags)
	msgs, _, err := DecodeContent(inner.Content)
	if err != nil {
		c.log.Warn("server sent something that is not JSON-RPC", "event", inner.ID.Hex(), "err", err)
		return
	}
	c.dispatch(inner, wrapKind, msgs)
}

// dispatch routes the messages of one inbound event (or of a reassembled
// transfer, whose inner is the end frame's event).
func (c *clientConn) dispatch(inner nostr.Event, wrapKind nostr.Kind, msgs []jsonrpc.Message) {
	for _, msg := range msgs {
		switch m := msg.(type) {
		case *jsonrpc.Response:
			c.handleResponse(inner, wrapKind, m)
		case *jsonrpc.Request:
			c.view.answeredIn(wrapKind != 0)
			if m.IsCall() {
				c.inbound.put(m.ID, inner.ID)
				c.deliver(m)
				continue
			}
			if c.paymentNotification(inner, m) {
				continue
			}
			if m.Method == mcpmsg.MethodProgress {
				if frame, ok, err := parseTransferFrame(m.Params); ok {
					c.receiveFrame(inner, wrapKind, frame, err)
					continue
				}
				if frame, ok, err := parseStreamFrame(m.Params); ok {
					c.receiveStreamFrame(frame, err)
					continue
				}
				tok, ok := mcpmsg.ProgressToken(m)
				c.keepAlive(tok)
				if ok && c.pending.injected(tok) {
					continue // progress on a token the go-sdk never chose
				}
			}
			c.deliver(m)
		}
	}
}

// receiveFrame handles one CEP-22 frame from the server.
func (c *clientConn) receiveFrame(inner nostr.Event, wrapKind nostr.Kind, p progressFrame, err error) {
	if err != nil {
		c.log.Info("dropping a malformed transfer frame", "err", err)
		return
	}
	c.keepAlive(p.ProgressToken)
	switch p.CVM.FrameType {
	case "accept":
		if ch, ok := c.accepts.take(p.ProgressToken); ok {
			close(ch)
		}
		return
	case "abort":
		c.transfers.frame(c.server, p, nil)
		c.failByToken(p.ProgressToken, fmt.Sprintf("contextvm: the server aborted the transfer: %s", p.CVM.Reason))
		return
	}
	assembled, _, done, err := c.transfers.frame(c.server, p, inner.Tags)
	if err != nil {
		c.log.Warn("aborting a fragmented answer", "err", err)
		c.abortTransfer(c.life.ctx, p.ProgressToken, err.Error())
		return
	}
	if !done {
		return
	}
	msgs, _, err := DecodeContent(assembled)
	if err != nil {
		c.abortTransfer(c.life.ctx, p.ProgressToken, "reassembled message is not JSON-RPC")
		return
	}
	c.dispatch(inner, wrapKind, msgs)
}

func (c *clientConn) handleResponse(inner nostr.Event, wrapKind nostr.Kind, m *jsonrpc.Response) {
	refusedWrapped, refusal := encryptionRefusal(m)
	if !refusal {
		c.view.answeredIn(wrapKind != 0)
	}
	ref, _ := firstTagValue(inner.Tags, "e")
	id, err := nostr.IDFromHex(ref)
	var p *pendingRequest
	if err == nil {
		if ping, ok := c.probes.take(id); ok {
			if !refusal {
				close(ping.answered)
			}
			return
		}
		p = c.pending.forEvent(id)
	}
	if p == nil {
		c.log.Debug("response to no pending request", "e", ref)
		return
	}
	if refusal && wrapKind == 0 && p.switchable && refusedWrapped == p.wrapped {
		// The server refused the form p first went in, now, not later: it
		// opened nothing, so it ran nothing, and sending the request again
		// in the other form is safe whatever its method, a tools/call too.
		c.pending.answered(p, id)
		why := "the server requires encryption: sending the request again gift-wrapped"
		if refusedWrapped {
			c.view.setEncryption(EncryptionUnsupported)
			why = "the server has encryption disabled: sending the request again in plaintext"
		} else {
			c.view.setEncryption(EncryptionSupported)
		}
		c.life.AfterFunc(0, func(ctx context.Context) { c.sendOtherForm(ctx, p, !refusedWrapped, why) })
		return
	}
	if c.opts.Payer != nil && c.opts.Payer.Answered(&PaidCall{c: c, p: p}, m) && m.Error != nil {
		c.pending.answered(p, id)
		return
	}
	if delay, ok := RetryAfter(m.Error); ok && c.retryable(p, delay) {
		c.pending.answered(p, id)
		// Busy means not acted on: asking again is safe, and soon enough
		// it is what the server asked for.
		p.busyRetries++
		c.log.Debug("server busy; asking again", "method", p.req.Method, "after", delay)
		c.life.AfterFunc(delay, func(ctx context.Context) { c.retryBusy(ctx, p) })
		return
	}
	if wait, ok := replicaErrorWait(m.Error); ok {
		c.holdReplicaError(p, m, wait)
		return
	}
	if wrapKind == 0 && p.switchable && p.wrapped && p.switched.Load() {
		c.view.plaintextCopyAnswered()
	}
	if !c.pending.remove(p) {
		return
	}
	if list, ok := listedKind[p.req.Method]; ok && m.Error == nil {
		c.view.learnPrices(inner.Tags, list)
	}
	c.answer(p, m)
}

// answer hands m to the go-sdk as the answer to p, which its caller has
// taken out of the table; an error also ends p's stream.
func (c *clientConn) answer(p *pendingRequest, m *jsonrpc.Response) {
	if m.Error != nil {
		c.endStream(p, fmt.Sprintf("the call ended with an error: %v", m.Error))
	}
	m.ID = p.req.ID
	c.deliver(m)
}

// endStream ends, with ErrStreamAborted and why, the CEP-41 stream p's
// caller reads, if it is still open: p is over, so no frame of it will
// come (a replica that died mid-stream, a timeout), and its reader must
// not wait for the liveness probe to find that out. A call answered with
// a result is left alone: its close frame may still be on its way.
func (c *clientConn) endStream(p *pendingRequest, why string) {
	if p.token.IsZero() {
		return
	}
	if r, ok := c.streams.get(p.token); ok {
		r.end(fmt.Errorf("%w: %s", ErrStreamAborted, why))
	}
}

// Busy answers that ask for a retry (CodeServerBusy with RetryAfter) are
// retried by the transport at most maxBusyRetries times per request, and
// only when the wait is at most maxBusyWait and half the request timeout:
// a longer wait is the caller's to decide on.
const (
	maxBusyRetries = 3
	maxBusyWait    = 5 * time.Second
)

// maxReplicaErrorWait bounds the wait for another replica's answer after a
// replica's error (replicaErrorWait). The server asks for its membership
// timeout, seconds (3 s by default); a group configured for more is not
// waited for beyond this.
const maxReplicaErrorWait = 10 * time.Second

// replicaErrorWait is how long the client waits, after err, a replica's
// error answer, for another answer to the same request event: the error's
// retry_after_ms, at most maxReplicaErrorWait. ok is false for any other
// answer, and for a replica error that asks for no wait.
func replicaErrorWait(err error) (wait time.Duration, ok bool) {
	wait, ok = retryAfter(err, CodeReplicaUnavailable, CodeReplicaLost)
	return min(wait, maxReplicaErrorWait), ok
}

// holdReplicaError keeps m, a replica's error answer to p, for wait before
// it answers p: every replica of a group receives every request, and
// another one may still answer with what the request did. Any other answer
// in that window wins, and m is dropped; a second replica error is dropped
// at once (the first stands). docs/replicas.md says when a group sends
// such an error at all.
func (c *clientConn) holdReplicaError(p *pendingRequest, m *jsonrpc.Response, wait time.Duration) {
	held := c.pending.holdReplicaError(p, m, func() *time.Timer {
		return c.life.AfterFunc(wait, func(context.Context) {
			if c.pending.remove(p) {
				c.answer(p, m)
			}
		})
	})
	if held {
		c.log.Debug("a replica could not serve the request; waiting for another to answer", "method", p.req.Method, "for", wait, "err", m.Error)
	}
}

// retryable reports whether p, answered busy with a retry after delay, is
// sent again rather than failed.
func (c *clientConn) retryable(p *pendingRequest, delay time.Duration) bool {
	if p.busyRetries >= maxBusyRetries || delay > maxBusyWait {
		return false
	}
	if c.opts.RequestTimeout > 0 && delay > c.opts.RequestTimeout/2 {
		return false
	}
	return c.pending.isPending(p)
}

// retryBusy sends p again, as a new event with the client's capability
// tags (the server that refused it may not have kept them), unless it has
// been answered (a timeout, Close) meanwhile.
func (c *clientConn) retryBusy(ctx context.Context, p *pendingRequest) {
	if !c.pending.isPending(p) {
		return
	}
	content, err := EncodeContent(p.wire)
	if err != nil {
		return
	}
	tags := append(nostr.Tags{{"p", c.server.Hex()}}, capabilityTags(c.opts.Encryption, c.opts.GiftWrap, c.fragmenting(), c.opts.OpenStreams)...)
	tags = append(tags, c.paymentTags(p, false)...)
	wrapKind := c.wrapKind()
	if c.fragmenting() && finalSize(content, tags, wrapKind) > c.opts.OversizedThreshold {
		c.writeFragmented(ctx, p, content, tags, wrapKind, c.view.oversized())
		return
	}
	if _, err := c.sendTracked(ctx, p, content, tags, wrapKind); err != nil && !errors.Is(err, nostrx.ErrUnheard) && c.pending.remove(p) {
		c.fail(p.req.ID, CodeTransportError, fmt.Sprintf("contextvm: %s not delivered on retry: %v", p.req.Method, err))
	}
}

// keepAlive restarts the timeout of the request that asked for progress
// with token. Tokens are compared as JSON values: progress on "1" is not
// progress on 1.
func (c *clientConn) keepAlive(token mcpmsg.Token) {
	if token.IsZero() || c.opts.RequestTimeout <= 0 {
		return
	}
	c.pending.keepAlive(token, c.opts.RequestTimeout)
}

// statelessInitializeResult is the local answer to initialize in stateless
// mode (CEP-35). It claims the list capabilities, as the reference does: the
// server's real capabilities are unknown until it answers a request.
func statelessInitializeResult(req *jsonrpc.Request) *jsonrpc.Response {
	version := ProtocolVersion
	if asked := mcpmsg.StringParam(req.Params, "protocolVersion"); asked != "" && asked <= ProtocolVersion {
		version = asked
	}
	result, _ := json.Marshal(map[string]any{
		"protocolVersion": version,
		"capabilities": map[string]any{
			"tools":     map[string]any{"listChanged": true},
			"prompts":   map[string]any{"listChanged": true},
			"resources": map[string]any{"listChanged": true, "subscribe": true},
		},
		"serverInfo": map[string]any{"name": "Emulated-Stateless-Server", "version": "1.0.0"},
	})
	return mcpmsg.Result(req.ID, result)
}

// openStream registers a reader for the stream on token. Its frames are
// published through the connection, its probes run as work of the
// connection's lifetime, and Close ends it.
func (c *clientConn) openStream(token mcpmsg.Token) (*StreamReader, error) {
	if c.life.stopping() {
		return nil, mcp.ErrConnectionClosed
	}
	r := newStreamReader(token, c.opts.Streams)
	r.send = func(ctx context.Context, frame *jsonrpc.Request) error {
		if !c.life.enter() {
			return mcp.ErrConnectionClosed
		}
		defer c.life.leave()
		ctx, cancel := c.life.join(ctx)
		defer cancel()
		content, err := EncodeContent(frame)
		if err != nil {
			return err
		}
		_, err = c.send(ctx, c.server, content, nostr.Tags{{"p", c.server.Hex()}}, c.wrapKind())
		return err
	}
	r.async = func(f func(context.Context)) { c.life.Go(f) }
	r.onEnd = func() { c.streams.deleteIf(token, r) }
	c.streams.put(token, r)
	r.arm(c.life.AfterFunc)
	if c.life.stopping() {
		// Close drained the streams before this one was put there.
		r.end(mcp.ErrConnectionClosed)
		return nil, mcp.ErrConnectionClosed
	}
	return r, nil
}

// receiveStreamFrame hands a CEP-41 frame to the reader of its token.
func (c *clientConn) receiveStreamFrame(p streamProgress, err error) {
	if err != nil {
		c.log.Info("dropping a malformed open-stream frame", "err", err)
		return
	}
	c.keepAlive(p.ProgressToken)
	r, ok := c.streams.get(p.ProgressToken)
	if !ok {
		c.log.Debug("open-stream frame nobody reads", "frame", p.CVM.FrameType)
		return
	}
	if err := r.frame(p.CVM); err != nil {
		c.log.Warn("aborting an open stream", "err", err)
		r.Abort(c.life.ctx, err.Error())
	}
}
