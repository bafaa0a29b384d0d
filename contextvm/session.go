package contextvm

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Header keys of mcp.RequestExtra.Header through which a ServerConn tells
// handlers who is calling. Read them with ClientPubkey and RequestEventID.
const (
	HeaderClientPubkey   = "Nostr-Client-Pubkey"
	HeaderRequestEventID = "Nostr-Request-Event-Id"
)

// ClientPubkey returns the public key of the client that made req, for
// requests that arrived through a ContextVM Server.
func ClientPubkey(req mcp.Request) (nostr.PubKey, bool) {
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return nostr.PubKey{}, false
	}
	pk, err := nostr.PubKeyFromHex(extra.Header.Get(HeaderClientPubkey))
	return pk, err == nil
}

// RequestEventID returns the id of the Nostr event that carried req.
func RequestEventID(req mcp.Request) (nostr.ID, bool) {
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return nostr.ID{}, false
	}
	id, err := nostr.IDFromHex(extra.Header.Get(HeaderRequestEventID))
	return id, err == nil
}

// inboxSize bounds the messages waiting for the go-sdk to read them. A
// client that overruns it gets "server busy" answers, never silence.
const inboxSize = 256

// statelessInitID is the id of the initialize a server sends on behalf of a
// stateless client; its answer goes nowhere.
const statelessInitID = "cvm-stateless-initialize"

// ServerConn is one client session of a Server: an mcp.Connection carrying
// that client's messages. Hand it to mcp.Server.Connect with Transport.
//
// Requests reach the go-sdk with their id replaced by the event id that
// carried them, so that ids chosen by different clients, or reused by one,
// never collide; responses get the original id back. Cancellations and
// progress are translated the same way, per session.
type ServerConn struct {
	srv    *Server
	client nostr.PubKey
	id     string
	elem   *list.Element // in srv.lru; guarded by srv.mu

	inbox     chan jsonrpc.Message
	closed    chan struct{}
	closeOnce sync.Once

	mu            sync.Mutex
	routes        map[string]*route       // by the id the go-sdk sees (the request event id)
	byOrigID      map[jsonrpc.ID]string   // original JSON-RPC id -> route key
	progress      map[mcpmsg.Token]string // progress token -> route key
	caps          peerCaps
	sentDiscovery bool
	lastWrap      nostr.Kind // wrap kind of the latest inbound message, 0 for plaintext
	stateless     bool
	retired       bool
	active        time.Time
	subscribed    map[string]bool // resource URIs the client subscribed to
}

// route remembers where the answer to one request goes.
type route struct {
	origID   jsonrpc.ID
	eventID  nostr.ID
	wrapKind nostr.Kind
	token    mcpmsg.Token // progress token, if any
	method   string
	progress time.Time         // when the latest progress notification for it went out
	batch    *batch            // the batch it came in, if any
	index    int               // its position there
	stream   *StreamWriter     // an open stream for the request, if the tool opened one
	held     *jsonrpc.Response // the result, held until the stream ends
}

// progressSettle is how long a response waits after the latest progress
// notification of its request. The reference TypeScript client handles
// inbound events five at a time, concurrently, and drops progress that it
// finishes handling after the response; events that a Go server emits within
// a millisecond of each other get reordered there. A short pause keeps
// progress ahead of the result.
const progressSettle = 20 * time.Millisecond

func newServerConn(s *Server, client nostr.PubKey, id string) *ServerConn {
	return &ServerConn{
		srv:        s,
		client:     client,
		id:         id,
		inbox:      make(chan jsonrpc.Message, inboxSize),
		closed:     make(chan struct{}),
		routes:     make(map[string]*route),
		byOrigID:   make(map[jsonrpc.ID]string),
		progress:   make(map[mcpmsg.Token]string),
		active:     time.Now(),
		subscribed: make(map[string]bool),
	}
}

// Client is the public key of the session's client.
func (c *ServerConn) Client() nostr.PubKey { return c.client }

// SessionID identifies the session (client key prefix and a sequence number).
func (c *ServerConn) SessionID() string { return c.id }

// Transport returns an mcp.Transport whose Connect returns c, for
// mcp.Server.Connect. It caps the protocol versions at ProtocolVersion.
func (c *ServerConn) Transport() mcp.Transport { return sessionTransport{c} }

type sessionTransport struct{ c *ServerConn }

func (t sessionTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// SupportsProtocolVersion keeps 2026-07-28 out of server/discover answers:
// its stateless requests and multi-round-trip elicitation are unknown to
// ContextVM peers.
func (sessionTransport) SupportsProtocolVersion(v string) bool { return v <= ProtocolVersion }

func (c *ServerConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.inbox:
		return msg, nil
	case <-c.closed:
		return nil, mcp.ErrConnectionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the session. Requests still in flight are answered with an
// error first.
func (c *ServerConn) Close() error {
	c.abort("session closed")
	return nil
}

func (c *ServerConn) abort(reason string) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		routes := c.routes
		c.routes = make(map[string]*route)
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, r := range routes {
			resp := &jsonrpc.Response{ID: r.origID, Error: &jsonrpc.Error{Code: CodeTransportError, Message: "contextvm: " + reason}}
			c.sendResponse(ctx, r, resp)
		}
		close(c.closed)
		c.srv.forget(c)
	})
}

// retire takes the session out of service: it closes once nothing is in
// flight.
func (c *ServerConn) retire() {
	c.mu.Lock()
	c.retired = true
	idle := len(c.routes) == 0
	c.mu.Unlock()
	if idle {
		c.Close()
	}
}

func (c *ServerConn) lastActive() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

func (c *ServerConn) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.routes)
}

// deliver queues a message for the go-sdk; it reports false when there is no
// room.
func (c *ServerConn) deliver(msg jsonrpc.Message) bool {
	select {
	case c.inbox <- msg:
		return true
	case <-c.closed:
		return false
	default:
		return false
	}
}

// initializeForClient performs the MCP handshake on behalf of a stateless
// client (CEP-35), which never sends initialize.
func (c *ServerConn) initializeForClient() {
	c.mu.Lock()
	c.stateless = true
	c.mu.Unlock()
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "stateless-client", "version": "0"},
	})
	c.deliver(&jsonrpc.Request{ID: mcpmsg.StringID(statelessInitID), Method: mcpmsg.MethodInitialize, Params: params})
	c.deliver(&jsonrpc.Request{Method: mcpmsg.MethodInitialized, Params: json.RawMessage(`{}`)})
}

// receive takes one inbound request or notification from the client; b and
// i place it in its batch, if it came in one.
func (c *ServerConn) receive(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind, b *batch, i int, m *jsonrpc.Request) {
	c.mu.Lock()
	c.active = time.Now()
	c.lastWrap = wrapKind
	if m.IsCall() && m.Method == mcpmsg.MethodInitialize {
		c.caps = peerCaps{}
	}
	if caps, ok := learnCaps(inner.Tags); ok {
		c.caps = caps
	}
	c.mu.Unlock()
	c.srv.touch(c)

	if !m.IsCall() {
		c.receiveNotification(m)
		return
	}
	key := inner.ID.Hex()
	if b != nil {
		key += "/" + strconv.Itoa(i) // every member of a batch shares its event id
	}
	r := &route{origID: m.ID, eventID: inner.ID, wrapKind: wrapKind, method: m.Method, batch: b, index: i}
	r.token, _ = mcpmsg.ProgressToken(m)
	c.mu.Lock()
	if _, dup := c.routes[key]; dup {
		c.mu.Unlock()
		return
	}
	c.routes[key] = r
	c.byOrigID[m.ID] = key
	if !r.token.IsZero() {
		c.progress[r.token] = key
	}
	switch m.Method {
	case mcpmsg.MethodSubscribe, mcpmsg.MethodUnsubscribe:
		if uri := mcpmsg.StringParam(m.Params, "uri"); uri != "" {
			c.subscribed[uri] = m.Method == mcpmsg.MethodSubscribe
		}
	}
	c.mu.Unlock()

	if m.Method == mcpmsg.MethodShutdown {
		// Seed 002: answer with an empty result, then end the session.
		c.srv.async(func() {
			c.Write(ctx, mcpmsg.EmptyResult(mcpmsg.StringID(key)))
			c.retire()
		})
		return
	}
	fwd := &jsonrpc.Request{ID: mcpmsg.StringID(key), Method: m.Method, Params: m.Params, Extra: &mcp.RequestExtra{Header: http.Header{
		HeaderClientPubkey:   {c.client.Hex()},
		HeaderRequestEventID: {inner.ID.Hex()},
	}}}
	if c.srv.opts.InjectClientPubkey {
		fwd.Params = mcpmsg.SetMeta(fwd.Params, "clientPubkey", c.client.Hex())
	}
	if !c.deliver(fwd) {
		c.srv.log.Warn("session inbox full; refusing a request", "session", c.id, "method", m.Method)
		c.dropRoute(key)
		c.srv.async(func() {
			c.sendResponse(ctx, r, mcpmsg.ErrorResponse(m.ID, CodeServerBusy, "server busy: too many requests in flight; retry later"))
		})
	}
}

func (c *ServerConn) receiveNotification(m *jsonrpc.Request) {
	if m.Method == mcpmsg.MethodCancelled {
		// The client names the request by its own id; the go-sdk knows it
		// by the event id. The reference SDK skips this and loses cancels.
		if id, _, ok := mcpmsg.CancelledRequest(m.Params); ok {
			c.mu.Lock()
			key, ok := c.byOrigID[id]
			c.mu.Unlock()
			if !ok {
				c.srv.log.Debug("cancel for no request in flight", "session", c.id, "requestId", id.Raw())
				return
			}
			fwd, err := mcpmsg.WithCancelledRequest(m, mcpmsg.StringID(key))
			if err != nil {
				return
			}
			m = fwd
		}
	}
	if !c.deliver(m) {
		c.srv.log.Warn("session inbox full; dropping a notification", "session", c.id, "method", m.Method)
	}
}

func (c *ServerConn) dropRoute(key string) *route {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.routes[key]
	if r == nil {
		return nil
	}
	delete(c.routes, key)
	delete(c.byOrigID, r.origID)
	if !r.token.IsZero() && c.progress[r.token] == key {
		delete(c.progress, r.token)
	}
	return r
}

func (c *ServerConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		key, _ := m.ID.Raw().(string)
		if key == statelessInitID {
			return nil // answer to our own handshake on a stateless client's behalf
		}
		if c.holdBehindStream(key, m) {
			return nil
		}
		r := c.dropRoute(key)
		if r == nil {
			c.srv.log.Warn("response to no request in flight", "session", c.id, "id", m.ID.Raw())
			return nil
		}
		resp := *m
		resp.ID = r.origID
		if wait := progressSettle - time.Since(r.progress); !r.progress.IsZero() && wait > 0 {
			time.Sleep(wait)
		}
		c.sendResponse(ctx, r, &resp)
		c.mu.Lock()
		done := c.retired && len(c.routes) == 0
		c.mu.Unlock()
		if done {
			c.Close()
		}
		return nil
	case *jsonrpc.Request:
		select {
		case <-c.closed:
			return mcp.ErrConnectionClosed
		default:
		}
		if m.IsCall() {
			return c.sendRequest(ctx, m)
		}
		c.sendNotification(ctx, m)
		return nil
	}
	return fmt.Errorf("contextvm: unknown message type %T", msg)
}

// discoveryLocked returns the tags to add to the next message and marks
// them sent: the server's discovery tags go on its first message of each
// session.
func (c *ServerConn) discoveryLocked() nostr.Tags {
	if c.sentDiscovery {
		return nil
	}
	c.sentDiscovery = true
	o := c.srv.opts
	return serverDiscoveryTags(o.Info, o.Encryption, o.GiftWrap, o.OversizedThreshold > 0, o.OpenStreams)
}

// openStream opens a CEP-41 stream for the request with route key.
func (c *ServerConn) openStream(key string) (*StreamWriter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.routes[key]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: the request is no longer in flight", ErrStreamsUnsupported)
	case r.token.IsZero():
		return nil, fmt.Errorf("%w: the request carries no progress token", ErrStreamsUnsupported)
	case !c.caps.openStream:
		return nil, fmt.Errorf("%w: the client has not said it reads open streams", ErrStreamsUnsupported)
	case r.stream != nil:
		return r.stream, nil
	}
	w := &StreamWriter{token: r.token, aborted: make(chan struct{})}
	w.send = func(ctx context.Context, frame *jsonrpc.Request) error {
		content, err := EncodeContent(frame)
		if err != nil {
			return err
		}
		c.mu.Lock()
		tags := append(nostr.Tags{{"p", c.client.Hex()}, {"e", r.eventID.Hex()}}, c.discoveryLocked()...)
		wrap := c.wrapKindLocked(r.wrapKind)
		c.mu.Unlock()
		_, err = c.srv.send(ctx, c.client, content, tags, wrap)
		return err
	}
	w.onDone = func() {
		c.mu.Lock()
		held := r.held
		r.held = nil
		c.mu.Unlock()
		if held != nil {
			c.Write(context.Background(), held)
		}
	}
	r.stream = w
	return w, nil
}

// holdBehindStream keeps the response to a request whose stream is still
// open, to be sent when the stream ends (CEP-41: the result follows the
// close). It reports whether it kept it. The stream's own frames take its
// lock and then c.mu, so c.mu is never held while asking the stream.
func (c *ServerConn) holdBehindStream(key string, m *jsonrpc.Response) bool {
	c.mu.Lock()
	r := c.routes[key]
	var w *StreamWriter
	if r != nil {
		w = r.stream
	}
	c.mu.Unlock()
	if w == nil || w.finished() {
		return false
	}
	held := *m
	c.mu.Lock()
	r.held = &held
	c.mu.Unlock()
	if !w.finished() {
		return true // the stream's end sends it
	}
	// The stream ended meanwhile: whoever takes held back sends it.
	c.mu.Lock()
	mine := r.held == &held
	if mine {
		r.held = nil
	}
	c.mu.Unlock()
	return !mine
}

// streamFrame takes a CEP-41 frame from the client: a ping for one of this
// session's streams, or an abort. Routed by this session's tokens only: the
// reference looks tokens up across clients and pongs the wrong one.
func (c *ServerConn) streamFrame(p streamProgress) {
	c.mu.Lock()
	var w *StreamWriter
	if key, ok := c.progress[p.ProgressToken]; ok {
		if r := c.routes[key]; r != nil {
			w = r.stream
		}
	}
	c.mu.Unlock()
	if w == nil {
		c.srv.log.Debug("open-stream frame for no stream", "session", c.id, "frame", p.CVM.FrameType)
		return
	}
	switch p.CVM.FrameType {
	case "ping":
		c.srv.async(func() { w.pong(context.Background(), p.CVM.Nonce) })
	case "abort":
		w.remoteAbort(p.CVM.Reason)
	}
}

// toldDiscovery reports whether the client has been sent the server's
// discovery tags in this session.
func (c *ServerConn) toldDiscovery() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sentDiscovery
}

// observe learns from an inbound event that is not a message of its own
// (a transfer frame).
func (c *ServerConn) observe(inner nostr.Event, wrapKind nostr.Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = time.Now()
	c.lastWrap = wrapKind
	if caps, ok := learnCaps(inner.Tags); ok {
		c.caps = caps
	}
}

// wrapKindLocked is the wrap for a message answering one that came in
// mirror (0: plaintext).
func (c *ServerConn) wrapKindLocked(mirror nostr.Kind) nostr.Kind {
	switch c.srv.opts.Encryption {
	case EncryptDisabled:
		return 0
	case EncryptOptional:
		if mirror == 0 {
			return 0
		}
	}
	return wrapKindFor(c.srv.opts.GiftWrap, c.caps.ephemeral, mirror)
}

func (c *ServerConn) sendResponse(ctx context.Context, r *route, resp *jsonrpc.Response) {
	resp, listTags := c.srv.decorateList(r.method, resp)
	if r.batch != nil {
		if content, done := r.batch.answer(r.index, resp); done {
			c.mu.Lock()
			tags := c.discoveryLocked()
			c.mu.Unlock()
			c.srv.sendBatch(ctx, c.client, r.batch, content, tags)
		}
		return
	}
	content, err := EncodeContent(resp)
	if err != nil {
		c.srv.log.Error("encode response", "err", err)
		return
	}
	c.mu.Lock()
	routing := nostr.Tags{{"p", c.client.Hex()}, {"e", r.eventID.Hex()}}
	tags := append(slices.Clone(routing), c.discoveryLocked()...)
	tags = append(tags, listTags...)
	wrap := c.wrapKindLocked(r.wrapKind)
	clientCEP22 := c.caps.oversized
	c.mu.Unlock()
	if o := c.srv.opts; o.OversizedThreshold > 0 && finalSize(content, tags, wrap) > o.OversizedThreshold {
		if !r.token.IsZero() && clientCEP22 {
			err = c.srv.sendFragmented(ctx, c.client, content, r.token, func() nostr.Tags { return tags },
				func() nostr.Tags { return routing }, wrap, o.OversizedThreshold, nil, nil)
			if err == nil {
				return
			}
			c.srv.log.Warn("fragmented response failed", "session", c.id, "method", r.method, "err", err)
		} else if !singleEventFits(content, tags, wrap, o.MaxEventBytes) {
			why := "the client did not ask for progress (no progressToken), which CEP-22 fragments need"
			if !clientCEP22 {
				why = "the client does not support oversized transfers (CEP-22)"
			}
			err = fmt.Errorf("%w: %d bytes and %s", ErrTooLarge, len(content), why)
		}
	}
	if err == nil {
		_, err = c.srv.reply(ctx, c.client, content, tags, wrap)
	}
	if errors.Is(err, ErrTooLarge) && resp.Error == nil {
		// An answer that neither one event nor CEP-22 fragments can carry is
		// replaced by one the caller can read, instead of silence.
		c.srv.log.Warn("response too large for one event; answering with an error", "session", c.id, "method", r.method, "err", err)
		tooLarge := &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: CodeResponseTooLarge,
			Message: fmt.Sprintf("the %s result is too large to deliver in one Nostr event: %v", r.method, err)}}
		if content, err = EncodeContent(tooLarge); err == nil {
			_, err = c.srv.reply(ctx, c.client, content, tags, wrap)
		}
	}
	if err != nil {
		c.srv.log.Warn("response not delivered", "session", c.id, "method", r.method, "err", err)
	}
}

func (c *ServerConn) sendNotification(ctx context.Context, m *jsonrpc.Request) {
	c.mu.Lock()
	tags := nostr.Tags{{"p", c.client.Hex()}}
	switch m.Method {
	case mcpmsg.MethodProgress:
		// Correlated to the request that asked for it, in this session only:
		// the reference looks the token up across all clients and leaks.
		tok, _ := mcpmsg.ProgressToken(m)
		if key, ok := c.progress[tok]; ok && !tok.IsZero() {
			tags = append(tags, nostr.Tag{"e", key})
			if r := c.routes[key]; r != nil {
				r.progress = time.Now()
			}
		}
	case mcpmsg.MethodUpdated:
		if !c.subscribed[mcpmsg.StringParam(m.Params, "uri")] {
			c.mu.Unlock()
			return // the client did not subscribe to this resource
		}
	default:
		if c.stateless && isBroadcast(m.Method) {
			c.mu.Unlock()
			return // a stateless client keeps no session to notify
		}
	}
	tags = append(tags, c.discoveryLocked()...)
	wrap := c.wrapKindLocked(c.lastWrap)
	c.mu.Unlock()
	content, err := EncodeContent(m)
	if err != nil {
		return
	}
	if _, err := c.srv.send(ctx, c.client, content, tags, wrap); err != nil {
		c.srv.log.Info("notification not delivered", "session", c.id, "method", m.Method, "err", err)
	}
}

// sendRequest sends a server-to-client request (ping, sampling, elicitation,
// roots) and remembers the session its answer belongs to.
func (c *ServerConn) sendRequest(ctx context.Context, m *jsonrpc.Request) error {
	content, err := EncodeContent(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	tags := append(nostr.Tags{{"p", c.client.Hex()}}, c.discoveryLocked()...)
	wrap := c.wrapKindLocked(c.lastWrap)
	c.mu.Unlock()
	evt, err := newMessageEvent(ctx, c.srv.signer, content, tags)
	if err != nil {
		return err
	}
	c.srv.mu.Lock()
	c.srv.outbound[evt.ID] = c
	c.srv.mu.Unlock()
	out := evt
	if wrap != 0 {
		if out, err = Wrap(evt, c.client, wrap); err != nil {
			return err
		}
	}
	if err := c.srv.pool.Publish(ctx, out); err != nil {
		c.srv.mu.Lock()
		delete(c.srv.outbound, evt.ID)
		c.srv.mu.Unlock()
		// The go-sdk would close the session on a Write error; answer the
		// request locally instead so that only this call fails.
		c.deliver(&jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: CodeTransportError, Message: fmt.Sprintf("contextvm: %s not delivered to the client: %v", m.Method, err)}})
	}
	return nil
}

// isBroadcast reports whether a notification concerns every client rather
// than one request: list changes and log messages.
func isBroadcast(method string) bool {
	return mcpmsg.ListChanged(method) || method == mcpmsg.MethodLogMessage
}
