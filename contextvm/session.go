package contextvm

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
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

// busyMessage is the message of a CodeServerBusy answer.
const busyMessage = "server busy: too many requests in flight; retry later"

// statelessInitID is the id of the initialize a server sends on behalf of a
// stateless client; its answer goes nowhere.
const statelessInitID = "cvm-stateless-initialize"

// abortGrace is how long a closing session gives itself to answer what it
// has in flight and to let its other work (a response being published, a
// pong) finish; then that work is cancelled. Answers go out all at once, so
// it is the time of one publish with its retries while the client
// subscribes (about 0.8 s, unheardRetries), with room to spare; a relay
// that does not answer in that time holds up no shutdown for longer.
const abortGrace = 2 * time.Second

// ServerConn is one client session of a Server: an mcp.Connection carrying
// that client's messages. Hand it to mcp.Server.Connect with Transport.
//
// Requests reach the go-sdk with their id replaced by the event id that
// carried them, so that ids chosen by different clients, or reused by one,
// never collide; responses get the original id back. Cancellations and
// progress are translated the same way, per session.
//
// The requests in flight are its route table; what it publishes (answers,
// notifications, stream frames, pongs) is work of its lifetime, a child of
// the server's. Close answers every request in flight with an error, at
// once, and returns when all of the session's work has ended; a Write after
// Close begins publishes nothing.
type ServerConn struct {
	srv    *Server
	client nostr.PubKey
	id     string
	elem   *list.Element // in srv.sessions' LRU; guarded by its lock

	life      *lifetime
	inbox     chan jsonrpc.Message
	closed    chan struct{}
	closeOnce sync.Once

	routes     *routeTable
	subscribed registry[string, bool] // resource URIs the client subscribed to

	mu            sync.Mutex // guards what the session knows of its client:
	caps          peerCaps
	sentDiscovery bool
	lastWrap      nostr.Kind // wrap kind of the latest inbound message, 0 for plaintext
	stateless     bool
	retired       bool
	active        time.Time
	failed        *jsonrpc.Error // why the session could not start, if it could not

	gate GateSession // the server's Gate's part of the session; nil without one
}

// progressSettle is how long a response waits after the latest progress
// notification of its request. The reference TypeScript client handles
// inbound events five at a time, concurrently (its TaskQueue), and drops
// progress that it finishes handling after the response: events published
// within a millisecond of each other get reordered there, and a relay's OK
// for the progress, which the server has before it writes the response,
// says nothing of the client's queue. Nothing on the wire tells the server
// when the client has handled an event, so the wait is a time: only what
// is left of it since the latest progress (none for a request that sent
// its progress earlier, or none), and spent on a goroutine of the response's
// own, so that the session's other writes never wait behind it.
const progressSettle = 20 * time.Millisecond

func newServerConn(s *Server, client nostr.PubKey, id string) *ServerConn {
	c := &ServerConn{
		srv:    s,
		client: client,
		id:     id,
		life:   newLifetime(s.life.ctx),
		inbox:  make(chan jsonrpc.Message, inboxSize),
		closed: make(chan struct{}),
		routes: newRouteTable(),
		active: time.Now(),
	}
	if s.gate != nil {
		c.gate = s.gate.Session()
	}
	return c
}

// Client is the public key of the session's client.
func (c *ServerConn) Client() nostr.PubKey { return c.client }

// SessionID identifies the session (client key prefix and a sequence number).
func (c *ServerConn) SessionID() string { return c.id }

// Stateless reports whether the session began with a request rather than
// an initialize (a stateless client, CEP-35, or a client whose session
// ended under it): the server initialized it on the client's behalf, with
// no client capabilities, and it gets no broadcast notifications.
func (c *ServerConn) Stateless() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateless
}

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
	answer := c.failure()
	if answer == nil {
		answer = transportError("session closed")
	}
	c.abort(answer)
	return nil
}

// failure is why the session could not start, or nil.
func (c *ServerConn) failure() *jsonrpc.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// transportError is the error that answers requests a session could not
// finish for reason.
func transportError(reason string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: CodeTransportError, Message: "contextvm: " + reason}
}

// abort closes the session: from its first step nothing new is admitted
// (Write publishes nothing, no message is routed to it, no request added);
// then every request in flight is answered with answer, all at once, within
// abortGrace; then the session's remaining work is cancelled and waited for.
func (c *ServerConn) abort(answer *jsonrpc.Error) {
	c.closeOnce.Do(func() {
		c.life.stop()
		c.srv.forget(c)
		routes := c.routes.close()
		close(c.closed)
		grace := time.AfterFunc(abortGrace, c.life.cancel)
		defer grace.Stop()
		var answers sync.WaitGroup
		for _, r := range routes {
			select {
			case c.srv.answering <- struct{}{}:
			case <-c.life.ctx.Done():
				// Out of time: what is left is not answered.
				c.srv.log.Warn("closing session: requests left unanswered", "session", c.id)
			}
			if c.life.ctx.Err() != nil {
				break
			}
			answers.Go(func() {
				defer func() { <-c.srv.answering }()
				c.sendResponse(c.life.ctx, r, &jsonrpc.Response{ID: r.origID, Error: answer})
			})
		}
		answers.Wait()
		c.life.close()
	})
}

// retire takes the session out of service: it closes once nothing is in
// flight.
func (c *ServerConn) retire() {
	c.mu.Lock()
	c.retired = true
	c.mu.Unlock()
	if c.routes.len() == 0 {
		c.srv.closeLater(c)
	}
}

func (c *ServerConn) lastActive() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

func (c *ServerConn) inFlight() int { return c.routes.len() }

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
	c.handshake(params)
}

// rebuild performs the MCP handshake again on behalf of a client whose
// session another replica of the group held, with the initialize params and
// discovery tags the client sent it: the client carries on without knowing.
func (c *ServerConn) rebuild(params json.RawMessage, tags nostr.Tags) {
	c.mu.Lock()
	if caps, ok := learnCaps(tags); ok {
		c.caps = caps
	}
	c.mu.Unlock()
	c.handshake(params)
}

// handshake sends the initialize (with params) and initialized that the
// client would have sent; the answer to the initialize goes nowhere.
func (c *ServerConn) handshake(params json.RawMessage) {
	c.deliver(&jsonrpc.Request{ID: mcpmsg.StringID(statelessInitID), Method: mcpmsg.MethodInitialize, Params: params})
	c.deliver(&jsonrpc.Request{Method: mcpmsg.MethodInitialized, Params: json.RawMessage(`{}`)})
}

// receive takes one inbound request or notification from the client; b and
// i place it in its batch, if it came in one. It reports false for a
// request the session can no longer take because it is closing; the caller
// answers that one.
func (c *ServerConn) receive(inner nostr.Event, wrapKind nostr.Kind, b *batch, i int, m *jsonrpc.Request) bool {
	c.mu.Lock()
	c.active = time.Now()
	c.lastWrap = wrapKind
	if m.IsCall() && m.Method == mcpmsg.MethodInitialize {
		c.caps = peerCaps{}
	}
	c.learnCapsLocked(inner.Tags)
	if c.gate != nil {
		c.gate.Learn(inner.Tags)
	}
	c.mu.Unlock()
	c.srv.sessions.touch(c)

	if !m.IsCall() {
		c.receiveNotification(m)
		return true
	}
	key := inner.ID.Hex()
	if b != nil {
		key += "/" + strconv.Itoa(i) // every member of a batch shares its event id
	}
	r := &route{origID: m.ID, eventID: inner.ID, wrapKind: wrapKind, method: m.Method, batch: b, index: i, created: inner.CreatedAt}
	r.token, _ = mcpmsg.ProgressToken(m)
	switch c.routes.add(key, r) {
	case duplicate:
		return true
	case refused:
		return false
	}
	switch m.Method {
	case mcpmsg.MethodSubscribe, mcpmsg.MethodUnsubscribe:
		if uri := mcpmsg.StringParam(m.Params, "uri"); uri != "" {
			c.subscribed.put(uri, m.Method == mcpmsg.MethodSubscribe)
		}
	}

	if m.Method == mcpmsg.MethodShutdown {
		// Seed 002: answer with an empty result, then end the session.
		c.answerLater(func(ctx context.Context) {
			c.Write(ctx, mcpmsg.EmptyResult(mcpmsg.StringID(key)))
			c.retire()
		})
		return true
	}
	fwd := &jsonrpc.Request{ID: mcpmsg.StringID(key), Method: m.Method, Params: m.Params, Extra: &mcp.RequestExtra{Header: http.Header{
		HeaderClientPubkey:   {c.client.Hex()},
		HeaderRequestEventID: {inner.ID.Hex()},
	}}}
	if c.srv.opts.InjectClientPubkey {
		fwd.Params = mcpmsg.SetMeta(fwd.Params, "clientPubkey", c.client.Hex())
	}
	if c.gate != nil && c.gate.Admit(&Call{c: c, key: key, r: r, evt: inner, m: m, fwd: fwd}) {
		return true
	}
	c.forward(key, m, fwd)
	return true
}

// forward hands a request to the MCP handler, or answers it busy when the
// session's inbox is full.
func (c *ServerConn) forward(key string, m, fwd *jsonrpc.Request) {
	if !c.deliver(fwd) {
		c.srv.log.Warn("session inbox full; refusing a request", "session", c.id, "method", m.Method)
		if r := c.routes.drop(key); r != nil {
			c.answerLater(func(ctx context.Context) {
				c.sendResponse(ctx, r, mcpmsg.ErrorResponse(m.ID, CodeServerBusy, busyMessage))
			})
		}
	}
}

// answerLater runs f, which answers a request the session has taken out of
// its routes, on a goroutine of the session, or of the server when the
// session is closing: the request is no longer in flight, so the session's
// Close would not answer it, and it must not go unanswered.
func (c *ServerConn) answerLater(f func(ctx context.Context)) {
	if !c.life.Go(f) {
		c.srv.life.Go(f)
	}
}

func (c *ServerConn) receiveNotification(m *jsonrpc.Request) {
	if m.Method == mcpmsg.MethodCancelled {
		// The client names the request by its own id; the go-sdk knows it
		// by the event id. The reference SDK skips this and loses cancels.
		if id, _, ok := mcpmsg.CancelledRequest(m.Params); ok {
			key, ok := c.routes.keyOf(id)
			if !ok {
				c.srv.log.Debug("cancel for no request in flight", "session", c.id, "requestId", id.Raw())
				return
			}
			if g := c.srv.gate; g != nil && g.Cancelled(key) {
				return // the gate held it (a payment it waited for): the MCP server never saw it
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

// Write sends msg to the client. It is work of the session: Close waits for
// a Write under way, and cancels it when abortGrace is over. Once Close has
// begun, a request or notification fails with mcp.ErrConnectionClosed and
// publishes nothing; a response is dropped, its request having been
// answered by Close.
func (c *ServerConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if !c.life.enter() {
		if m, ok := msg.(*jsonrpc.Response); ok {
			c.srv.log.Debug("response after the session closed", "session", c.id, "id", m.ID.Raw())
			return nil
		}
		return mcp.ErrConnectionClosed
	}
	defer c.life.leave()
	ctx, cancel := c.life.join(ctx)
	defer cancel()
	switch m := msg.(type) {
	case *jsonrpc.Response:
		key, _ := m.ID.Raw().(string)
		if key == statelessInitID {
			// The answer to our own handshake on a stateless client's
			// behalf goes nowhere; if the handshake failed (a gateway
			// refusing the session, busy), so do the client's requests,
			// with that answer rather than a bare "session closed".
			var refusal *jsonrpc.Error
			if errors.As(m.Error, &refusal) {
				c.srv.log.Info("a stateless session could not start", "session", c.id, "err", refusal.Message)
				c.mu.Lock()
				c.failed = refusal
				c.mu.Unlock()
				c.srv.closeLater(c)
			}
			return nil
		}
		if c.holdBehindStream(key, m) {
			return nil
		}
		r := c.routes.drop(key)
		if r == nil {
			c.srv.log.Warn("response to no request in flight", "session", c.id, "id", m.ID.Raw())
			return nil
		}
		resp := r.withMeta(*m)
		resp.ID = r.origID
		if c.gate != nil {
			if call := r.keptBy(); call != nil {
				if content, err := EncodeContent(&resp); err == nil {
					c.srv.gate.Answered(ctx, call, content)
				}
			}
		}
		after := r.afterClosed()
		if (after != nil || r.settle() > 0) && c.life.Go(func(ctx context.Context) {
			// The response waits on a goroutine of its own, not on the
			// caller's: nothing else the session writes waits with it.
			if after != nil {
				select {
				case <-after:
				case <-ctx.Done():
				}
			}
			t := time.NewTimer(r.settle())
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			c.answer(ctx, r, &resp)
		}) {
			return nil
		}
		c.answer(ctx, r, &resp)
		return nil
	case *jsonrpc.Request:
		if m.IsCall() {
			return c.sendRequest(ctx, m)
		}
		c.sendNotification(ctx, m)
		return nil
	}
	return fmt.Errorf("contextvm: unknown message type %T", msg)
}

// answer sends the response to the request of r, and closes a retired
// session once it has answered everything.
func (c *ServerConn) answer(ctx context.Context, r *route, resp *jsonrpc.Response) {
	c.sendResponse(ctx, r, resp)
	c.mu.Lock()
	retired := c.retired
	c.mu.Unlock()
	if retired && c.routes.len() == 0 {
		c.srv.closeLater(c)
	}
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
	tags := serverDiscoveryTags(o.Info, o.Encryption, o.GiftWrap, o.OversizedThreshold > 0, o.OpenStreams)
	if c.gate != nil {
		tags = append(tags, c.gate.Tags()...)
	}
	return tags
}

// openStream opens a CEP-41 stream for the request with route key.
func (c *ServerConn) openStream(key string) (*StreamWriter, error) {
	r := c.routes.get(key)
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: the request is no longer in flight", ErrStreamsUnsupported)
	case r.token.IsZero():
		return nil, fmt.Errorf("%w: the request carries no progress token", ErrStreamsUnsupported)
	case !c.readsStreams():
		return nil, fmt.Errorf("%w: the client has not said it reads open streams", ErrStreamsUnsupported)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream != nil {
		return r.stream, nil
	}
	w := &StreamWriter{token: r.token, aborted: make(chan struct{})}
	w.send = func(ctx context.Context, frame *jsonrpc.Request) error {
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
		c.mu.Lock()
		tags := append(nostr.Tags{{"p", c.client.Hex()}, {"e", r.eventID.Hex()}}, c.discoveryLocked()...)
		wrap := c.wrapKindLocked(r.wrapKind)
		c.mu.Unlock()
		_, err = c.srv.send(ctx, c.client, content, tags, wrap)
		return err
	}
	w.onDone = func(wait bool) {
		r.mu.Lock()
		held := r.held
		r.held = nil
		r.mu.Unlock()
		switch {
		case held == nil:
		case wait:
			// Write runs under the session's lifetime, not the handler's
			// context: the result must go out even if the call's context
			// has ended.
			c.Write(context.Background(), held)
		default:
			// If the session is closing, the goroutine is refused and
			// Close answers the request, which is still in flight.
			c.life.Go(func(ctx context.Context) { c.Write(ctx, held) })
		}
	}
	r.stream = w
	return w, nil
}

// readsStreams reports whether the client said it reads open streams.
func (c *ServerConn) readsStreams() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps.openStream
}

// holdBehindStream keeps the response to a request whose stream is still
// open, to be sent when the stream ends (CEP-41: the result follows the
// close). It reports whether it kept it. The stream's own frames take its
// lock and then c.mu, so neither c.mu nor the route's lock is held while
// asking the stream.
func (c *ServerConn) holdBehindStream(key string, m *jsonrpc.Response) bool {
	r := c.routes.get(key)
	if r == nil {
		return false
	}
	r.mu.Lock()
	w := r.stream
	r.mu.Unlock()
	if w == nil || w.finished() {
		return false
	}
	held := *m
	r.mu.Lock()
	r.held = &held
	r.mu.Unlock()
	if !w.finished() {
		return true // the stream's end sends it
	}
	// The stream ended meanwhile: whoever takes held back sends it.
	r.mu.Lock()
	mine := r.held == &held
	if mine {
		r.held = nil
	}
	r.mu.Unlock()
	return !mine
}

// streamFrame takes a CEP-41 frame from the client: a ping for one of this
// session's streams, or an abort. Routed by this session's tokens only: the
// reference looks tokens up across clients and pongs the wrong one.
func (c *ServerConn) streamFrame(p streamProgress) {
	var w *StreamWriter
	if _, r := c.routes.forToken(p.ProgressToken); r != nil {
		r.mu.Lock()
		w = r.stream
		r.mu.Unlock()
	}
	if w == nil {
		c.srv.log.Debug("open-stream frame for no stream", "session", c.id, "frame", p.CVM.FrameType)
		return
	}
	switch p.CVM.FrameType {
	case "ping":
		nonce := p.CVM.Nonce
		c.life.Go(func(ctx context.Context) { w.pong(ctx, nonce) })
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
	c.learnCapsLocked(inner.Tags)
}

// learnCapsLocked takes what a client's discovery tags say it supports. A
// client sends them on its first message (and on a request it sends again
// after a busy answer), before it has heard the server's: when they reach
// a session that has sent its own already, they come from a client that
// has not heard them (another process under the same key, a stateless
// client whose key has a session here), and the session's next message
// carries them again.
func (c *ServerConn) learnCapsLocked(tags nostr.Tags) {
	if caps, ok := learnCaps(tags); ok {
		c.caps = caps
		c.sentDiscovery = false
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
	if r.batch == nil {
		defer c.srv.replicas.Answered(ctx, r.eventID, false) // answered: no survivor needs to answer it
	}
	resp, listTags := c.srv.decorateList(r.method, resp)
	if r.batch != nil {
		if content, done := r.batch.answer(r.index, resp); done {
			defer c.srv.replicas.Answered(ctx, r.batch.eventID, false) // the whole batch is answered
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
		tooLarge := mcpmsg.ErrorResponse(resp.ID, CodeResponseTooLarge, "the %s result is too large to deliver in one Nostr event: %v", r.method, err)
		if content, err = EncodeContent(tooLarge); err == nil {
			_, err = c.srv.reply(ctx, c.client, content, tags, wrap)
		}
	}
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, nostrx.ErrUnheard) && c.aborting() {
			// What abort answers as the session closes, to a client that
			// has gone (a one-shot command, one that gave up): no news.
			level = slog.LevelDebug
		}
		c.srv.log.Log(ctx, level, "response not delivered", "session", c.id, "method", r.method, "err", err)
	}
}

// aborting reports whether abort has begun: what is answered now is the
// session's closing answer to requests in flight.
func (c *ServerConn) aborting() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *ServerConn) sendNotification(ctx context.Context, m *jsonrpc.Request) {
	tags := nostr.Tags{{"p", c.client.Hex()}}
	switch m.Method {
	case mcpmsg.MethodProgress:
		// Correlated to the request that asked for it, in this session only:
		// the reference looks the token up across all clients and leaks.
		tok, _ := mcpmsg.ProgressToken(m)
		if key, r := c.routes.forToken(tok); r != nil {
			tags = append(tags, nostr.Tag{"e", key})
			r.mu.Lock()
			r.progress = time.Now()
			r.mu.Unlock()
		}
	case mcpmsg.MethodUpdated:
		if subscribed, _ := c.subscribed.get(mcpmsg.StringParam(m.Params, "uri")); !subscribed {
			return // the client did not subscribe to this resource
		}
	}
	c.mu.Lock()
	if c.stateless && isBroadcast(m.Method) {
		c.mu.Unlock()
		return // a stateless client keeps no session to notify
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
	c.srv.outbound.put(evt.ID, c)
	out := evt
	if wrap != 0 {
		if out, err = Wrap(evt, c.client, wrap); err != nil {
			return err
		}
	}
	if err := c.srv.pool.Publish(ctx, out); err != nil {
		c.srv.outbound.take(evt.ID)
		// The go-sdk would close the session on a Write error; answer the
		// request locally instead so that only this call fails.
		c.deliver(mcpmsg.ErrorResponse(m.ID, CodeTransportError, "contextvm: %s not delivered to the client: %v", m.Method, err))
	}
	return nil
}

// isBroadcast reports whether a notification concerns every client rather
// than one request: list changes and log messages.
func isBroadcast(method string) bool {
	return mcpmsg.ListChanged(method) || method == mcpmsg.MethodLogMessage
}
