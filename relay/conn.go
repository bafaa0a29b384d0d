package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip42"
	"fiatjaf.com/nostr/nip70"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/wsconn"
)

// Timing of a connection.
const (
	// writeTimeout bounds each write to a client: a peer that takes no
	// bytes for this long is gone, whatever its TCP stack says, and is
	// dropped as a slow consumer.
	writeTimeout = 10 * time.Second
	// pingInterval and pongTimeout detect dead peers, so that their
	// subscriptions do not outlive them.
	pingInterval = 30 * time.Second
	pongTimeout  = 20 * time.Second
)

// conn is one websocket client. Its messages are handled in order, one at a
// time; broadcasts from other connections reach it through the queue of its
// websocket connection.
//
// The goroutine serving the upgrade request owns it: it runs the read loop
// and starts the writer and the pinger, and waits for both.
type conn struct {
	r   *Relay
	ws  *wsconn.Conn
	req *http.Request
	ip  string
	url string // this relay's URL as the client reached it, for NIP-42

	ctx    context.Context // canceled by close
	cancel context.CancelFunc

	challenge string

	mu     sync.Mutex
	authed []nostr.PubKey
	subs   map[string][]*listener
}

type connKey struct{}

// connFrom returns the connection a policy hook is running for.
func connFrom(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

// wsOptions is the relay's policy for its connections: a broadcast never
// waits (Push), and a subscriber whose queue is full is dropped; the
// connection's own answers wait for room up to SlowConsumerTimeout
// (PushWait); a slow consumer is told why with 1008 when its socket still
// takes bytes; any message over MaxMessageBytes closes the connection with
// 1009.
func (r *Relay) wsOptions() wsconn.Options {
	return wsconn.Options{
		Accept: websocket.AcceptOptions{
			InsecureSkipVerify: true, // a public relay serves pages of any origin
		},
		MaxQueueBytes: r.limits.OutboundQueueBytes,
		MaxWait:       r.limits.SlowConsumerTimeout,
		WriteTimeout:  writeTimeout,
		ReadLimit:     r.limits.MaxMessageBytes,
		DropStatus:    websocket.StatusPolicyViolation,
		DropReason:    "slow consumer",
	}
}

func (r *Relay) serveWebsocket(w http.ResponseWriter, req *http.Request) {
	ip := r.clientIP(req)
	if !r.guard.allowConnection(ip) {
		r.metrics.rejected.WithLabelValues("rate-limited").Inc()
		r.log.Info("refused connection: rate limit", "ip", ip)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintln(w, `{"error":"rate-limited: too many new connections from your address; retry later"}`)
		return
	}
	ws, err := wsconn.Accept(w, req, r.wsOptions())
	if err != nil {
		r.log.Debug("websocket upgrade failed", "ip", ip, "err", err)
		return
	}
	challenge := make([]byte, 16)
	rand.Read(challenge)
	ctx, cancel := context.WithCancel(r.ctx)
	c := &conn{
		r:         r,
		ws:        ws,
		req:       req,
		ip:        ip,
		url:       "ws://" + req.Host + req.URL.Path,
		ctx:       ctx,
		cancel:    cancel,
		challenge: hex.EncodeToString(challenge),
		subs:      make(map[string][]*listener),
	}
	if req.TLS != nil || strings.EqualFold(req.Header.Get("X-Forwarded-Proto"), "https") {
		c.url = "wss://" + req.Host + req.URL.Path
	}
	if !r.conns.add(c) {
		cancel()
		ws.Close(websocket.StatusGoingAway, "relay shutting down")
		ws.Run()
		return
	}
	r.metrics.connections.Inc()
	defer func() {
		r.conns.remove(c)
		r.metrics.connections.Dec()
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.close()
	wg.Go(c.writeLoop)
	wg.Go(c.pingLoop)
	if r.opts.Auth {
		c.send(nostr.AuthEnvelope{Challenge: &c.challenge})
	}
	c.readLoop()
}

// inbound is one message on its way from the read loop to the handler. The
// signature of an EVENT is checked while earlier messages are handled:
// verification is what ingest costs, and one connection that pipelines
// events should get every core, while its messages still take effect in
// the order they were sent.
type inbound struct {
	env   nostr.Envelope
	err   error
	valid string        // for an EVENT: why it is invalid, "" if it is not
	ready chan struct{} // closed when valid is set
}

// verifyAhead bounds the events of one connection being verified at once.
const verifyAhead = 8

func (c *conn) readLoop() {
	queue := make(chan *inbound, verifyAhead)
	sem := make(chan struct{}, verifyAhead)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for in := range queue {
			<-in.ready
			c.handle(in)
		}
	}()
	defer func() {
		close(queue)
		<-done
		// Wait for the verifiers too, of messages never queued among them.
		for range verifyAhead {
			sem <- struct{}{}
		}
	}()
	for {
		_, data, err := c.ws.ReadMessage(c.ctx)
		if err != nil {
			if errors.Is(err, wsconn.ErrMessageTooBig) {
				c.r.metrics.rejected.WithLabelValues("too-big").Inc()
				c.r.log.Info("closed a connection that sent an oversized message", "ip", c.ip, "limit", c.r.limits.MaxMessageBytes)
			}
			return
		}
		in := &inbound{ready: make(chan struct{})}
		in.env, in.err = nostr.ParseMessage(string(data))
		if ev, ok := in.env.(*nostr.EventEnvelope); ok {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				switch {
				case !ev.Event.CheckID():
					in.valid = "invalid: id is computed incorrectly"
				case !c.r.verify(&ev.Event):
					in.valid = "invalid: signature is invalid"
				}
				close(in.ready)
			}()
		} else {
			close(in.ready)
		}
		select {
		case queue <- in:
		case <-c.ctx.Done():
			return
		}
	}
}

// writeLoop runs the connection's writer. When it is done, the connection
// is: the rest of it is torn down.
// verify checks evt's signature: the only place the relay does, once per
// event received (the fan-out sends the frame it has, unchecked again).
func (r *Relay) verify(evt *nostr.Event) bool {
	r.metrics.verified.Inc()
	return evt.VerifySignature()
}

func (c *conn) writeLoop() {
	if err := c.ws.Run(); errors.Is(err, wsconn.ErrWriteTimeout) {
		c.dropSlow(err)
	}
	c.close()
}

func (c *conn) pingLoop() {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(c.ctx, pongTimeout)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil {
				c.r.log.Debug("no pong; closing the connection", "ip", c.ip, "err", err)
				c.close()
				return
			}
		}
	}
}

// close ends the connection: its listeners go, its socket closes, and its
// context is canceled, which ends the reader and the pinger. Any goroutine
// may call it, any number of times; it does not block.
func (c *conn) close() {
	c.unsubscribeAll()
	c.ws.CloseNow()
	c.cancel()
}

// unsubscribeAll removes every listener of the connection.
func (c *conn) unsubscribeAll() {
	c.mu.Lock()
	subs := c.subs
	c.subs = map[string][]*listener{}
	c.mu.Unlock()
	if len(subs) == 0 {
		return
	}
	for _, ls := range subs {
		for _, l := range ls {
			c.r.dispatch.remove(l)
		}
	}
	c.r.metrics.listeners.Set(float64(c.r.dispatch.size()))
}

// envelope is what nostr's envelope types have in common.
type envelope interface{ MarshalJSON() ([]byte, error) }

// send queues one of the connection's own answers, waiting for room.
func (c *conn) send(env envelope) {
	frame, err := env.MarshalJSON()
	if err != nil {
		c.r.log.Error("encode envelope", "err", err)
		return
	}
	if err := c.ws.PushWait(frame); errors.Is(err, wsconn.ErrSlowConsumer) {
		c.dropSlow(err)
	}
}

// deliver queues a broadcast without waiting and reports whether it was
// queued; a full queue drops the connection instead of delaying the
// publisher.
func (c *conn) deliver(frame []byte) bool {
	err := c.ws.Push(frame)
	if errors.Is(err, wsconn.ErrSlowConsumer) {
		c.dropSlow(err)
	}
	return err == nil
}

// dropSlow accounts for a connection the websocket layer dropped as a slow
// consumer; it learns that once, from the push that overflowed or from its
// writer. The listeners go at once: the connection itself may take a
// moment longer, while it tries to send its close frame.
func (c *conn) dropSlow(why error) {
	c.r.metrics.slowConsumers.Inc()
	c.r.log.Warn("dropped slow consumer", "ip", c.ip, "why", why)
	c.unsubscribeAll()
}

func (c *conn) notice(msg string) { c.send(nostr.NoticeEnvelope(msg)) }

func (c *conn) handle(in *inbound) {
	env, err := in.env, in.err
	if env == nil {
		if errors.Is(err, nostr.UnknownLabel) {
			c.notice("error: unknown message type; this relay speaks EVENT, REQ, CLOSE, COUNT and AUTH")
		} else {
			c.notice("error: could not parse message: " + errString(err))
		}
		return
	}
	ctx := context.WithValue(c.ctx, connKey{}, c)
	switch env := env.(type) {
	case *nostr.EventEnvelope:
		if in.valid != "" {
			c.ok(env.Event.ID, false, in.valid)
			return
		}
		c.handleEvent(ctx, env.Event)
	case *nostr.ReqEnvelope:
		c.handleReq(ctx, env.SubscriptionID, env.Filters)
	case *nostr.CloseEnvelope:
		c.unsubscribe(string(*env))
	case *nostr.CountEnvelope:
		c.handleCount(ctx, env)
	case *nostr.AuthEnvelope:
		c.handleAuth(env.Event)
	default:
		c.notice("error: clients may not send " + fmt.Sprintf("%T", env))
	}
}

func errString(err error) string {
	if err == nil {
		return "malformed"
	}
	return err.Error()
}

func (c *conn) ok(id nostr.ID, ok bool, reason string) {
	c.send(nostr.OKEnvelope{EventID: id, OK: ok, Reason: reason})
}

// handleEvent takes an event whose id and signature are valid.
func (c *conn) handleEvent(ctx context.Context, evt nostr.Event) {
	if nip70.IsProtected(evt) && !c.isAuthed(evt.PubKey) {
		c.send(nostr.AuthEnvelope{Challenge: &c.challenge})
		c.ok(evt.ID, false, "auth-required: this event may only be published by its author")
		return
	}
	// khatru runs the policies and stores the event here; every refusal,
	// a deletion's included (storeEvent), comes back as an error before
	// anything is stored, so an event answered OK false is neither stored
	// nor broadcast.
	skip, err := c.r.khatru.AddEvent(ctx, evt)
	if err != nil {
		c.ok(evt.ID, false, err.Error())
		return
	}
	if skip {
		if !c.r.viewerFor(ctx).sees(evt) {
			// Stored, and hidden from this connection: it is told what it
			// would be told of a new event, not that the relay holds it.
			c.ok(evt.ID, true, "")
			return
		}
		c.ok(evt.ID, true, "duplicate: already have this event")
		return
	}
	n := c.r.broadcast(evt)
	if evt.Kind.IsEphemeral() && n == 0 {
		// The event is fine; nobody was listening. Publishers must not take
		// this for a rejection, and must not retry it.
		c.ok(evt.ID, false, "mute: no one was listening for this")
		return
	}
	c.ok(evt.ID, true, "")
}

func (c *conn) handleReq(ctx context.Context, id string, filters []nostr.Filter) {
	if id == "" || len(id) > 64 {
		c.send(nostr.ClosedEnvelope{SubscriptionID: id, Reason: "invalid: subscription id must be 1 to 64 characters"})
		return
	}
	c.unsubscribe(id) // a REQ with an open id replaces it
	for _, f := range filters {
		if reject, msg := c.r.onRequest(ctx, f); reject {
			c.refuse(id, msg)
			return
		}
	}
	// Live first, then stored: an event published while the stored query
	// runs reaches the client (perhaps twice) instead of falling in between.
	// khatru registers after the query and loses such events.
	if msg := c.subscribe(id, filters); msg != "" {
		c.r.metrics.rejected.WithLabelValues(reasonPrefix(msg)).Inc()
		c.send(nostr.ClosedEnvelope{SubscriptionID: id, Reason: msg})
		return
	}
	for _, f := range filters {
		if f.LimitZero {
			continue
		}
		for evt := range c.r.khatru.QueryStored(ctx, f) {
			c.send(nostr.EventEnvelope{SubscriptionID: &id, Event: evt})
		}
	}
	c.send(nostr.EOSEEnvelope(id))
}

// subscribe registers the live filters of a subscription, within the
// per-connection limits. It returns a CLOSED reason when over them.
func (c *conn) subscribe(id string, filters []nostr.Filter) string {
	var live []nostr.Filter
	for _, f := range filters {
		// A filter that only names ids asks for stored events.
		if f.IDs == nil {
			live = append(live, f)
		}
	}
	if len(live) == 0 {
		return ""
	}
	lim := c.r.limits
	c.mu.Lock()
	if lim.MaxSubscriptions >= 0 && len(c.subs) >= lim.MaxSubscriptions {
		c.mu.Unlock()
		return fmt.Sprintf("blocked: too many open subscriptions (limit %d); CLOSE one first", lim.MaxSubscriptions)
	}
	n := 0
	for _, ls := range c.subs {
		n += len(ls)
	}
	if lim.MaxFilters >= 0 && n+len(live) > lim.MaxFilters {
		c.mu.Unlock()
		return fmt.Sprintf("blocked: too many live filters on this connection (limit %d)", lim.MaxFilters)
	}
	quoted, _ := json.Marshal(id)
	prefix := append(append([]byte(`["EVENT",`), quoted...), ',') // see broadcast
	ls := make([]*listener, len(live))
	for i, f := range live {
		ls[i] = &listener{conn: c, sub: id, filter: f, prefix: prefix}
	}
	c.subs[id] = ls
	c.mu.Unlock()
	for _, l := range ls {
		c.r.dispatch.add(l)
	}
	c.r.metrics.listeners.Set(float64(c.r.dispatch.size()))
	return ""
}

func (c *conn) unsubscribe(id string) {
	c.mu.Lock()
	ls := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	for _, l := range ls {
		c.r.dispatch.remove(l)
	}
	if len(ls) > 0 {
		c.r.metrics.listeners.Set(float64(c.r.dispatch.size()))
	}
}

// refuse closes a REQ or COUNT; one refused for want of authentication
// comes with a challenge, so that the client knows to answer it.
func (c *conn) refuse(sub, msg string) {
	if strings.HasPrefix(msg, "auth-required:") {
		c.send(nostr.AuthEnvelope{Challenge: &c.challenge})
	}
	c.send(nostr.ClosedEnvelope{SubscriptionID: sub, Reason: msg})
}

func (c *conn) handleCount(ctx context.Context, env *nostr.CountEnvelope) {
	if reject, msg := c.r.onRequest(ctx, env.Filter); reject {
		c.refuse(env.SubscriptionID, msg)
		return
	}
	n, approximate := c.r.count(ctx, env.Filter)
	c.send(countAnswer{sub: env.SubscriptionID, n: n, approximate: approximate})
}

func (c *conn) handleAuth(evt nostr.Event) {
	pk, err := nip42.ValidateAuthEvent(evt, c.challenge, c.url)
	if err != nil {
		c.ok(evt.ID, false, "error: failed to authenticate: "+err.Error())
		return
	}
	c.mu.Lock()
	if !slices.Contains(c.authed, pk) {
		c.authed = append(c.authed, pk)
	}
	c.mu.Unlock()
	c.ok(evt.ID, true, "")
}

func (c *conn) isAuthed(pk nostr.PubKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.authed, pk)
}

func (c *conn) authedKeys() []nostr.PubKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.authed)
}

// authedFor reports whether the connection authenticated as a key evt
// names in a "p" tag.
func (c *conn) authedFor(evt nostr.Event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tag := range evt.Tags {
		if len(tag) >= 2 && tag[0] == "p" {
			for _, k := range c.authed {
				if k.Hex() == tag[1] {
					return true
				}
			}
		}
	}
	return false
}

// broadcast sends evt to every live listener it matches and returns how
// many got it. The event is encoded once.
func (r *Relay) broadcast(evt nostr.Event) int {
	ls := r.dispatch.match(evt)
	if len(ls) == 0 {
		return 0
	}
	body, err := evt.MarshalJSON()
	if err != nil {
		return 0
	}
	n := 0
	now := time.Now()
	for _, l := range ls {
		if !(viewer{r: r, c: l.conn, now: now}).sees(evt) {
			continue
		}
		frame := make([]byte, 0, len(l.prefix)+len(body)+1)
		frame = append(append(append(frame, l.prefix...), body...), ']')
		if l.conn.deliver(frame) {
			n++
		}
	}
	r.metrics.deliveries.Add(float64(n))
	return n
}
