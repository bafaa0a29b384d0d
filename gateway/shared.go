package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// hub serves every client session through one upstream session (Shared
// mode). The upstream knows one client, the gateway, so everything that
// identifies a client's request to it is the gateway's: request ids and
// progress tokens are renumbered on the way up and restored on the way
// down, subscriptions are counted per resource, and what the upstream sends
// on its own is delivered to whom it concerns.
type hub struct {
	g    *Gateway
	link *link
	log  *slog.Logger

	mu      sync.Mutex
	result  json.RawMessage // the upstream's initialize result, every client's answer
	members map[*member]bool
	calls   map[jsonrpc.ID]*call // by the id the upstream knows
	tokens  map[string]*call     // by the progress token the upstream knows
	fromUp  map[jsonrpc.ID]routed
	subs    map[string]map[*member]bool // resource URI -> subscribers
	next    int64
}

// call is a request sent upstream and not yet answered.
type call struct {
	m        *member // nil for the gateway's own requests
	origID   jsonrpc.ID
	method   string
	uri      string // for resources/subscribe and unsubscribe
	gen      uint64
	start    time.Time
	token    any    // the client's progress token
	upToken  string // tokenKey of the token the upstream knows
	internal bool
}

// routed is an upstream request handed to one client.
type routed struct {
	m   *member
	gen uint64
}

// member is one client session in Shared mode.
type member struct {
	h    *hub
	conn clientConn
	log  *slog.Logger
	out  chan jsonrpc.Message // drained by the member's writer
	done chan struct{}

	// guarded by h.mu
	caps     clientCaps
	inflight int
	last     time.Time
}

// clientCaps are the capabilities a client declared, which decide whether
// a request of the upstream's may go to it.
type clientCaps struct {
	Sampling    json.RawMessage `json:"sampling"`
	Elicitation json.RawMessage `json:"elicitation"`
	Roots       json.RawMessage `json:"roots"`
}

// outboxSize bounds the messages queued for one client. The upstream waits
// when a client's queue is full; clients are written to through relays,
// so only a stalled relay connection fills one.
const outboxSize = 1024

func newHub(ctx context.Context, g *Gateway) (*hub, error) {
	// The gateway relays sampling and elicitation to a client when it can
	// tell which; roots are per client and have no shared answer.
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": contextvm.ProtocolVersion,
		"capabilities":    map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}},
		"clientInfo":      g.opts.ClientInfo,
	})
	l, hs, err := openLink(ctx, g.linkOptions(params), true)
	if err != nil {
		return nil, err
	}
	h := &hub{
		g:       g,
		link:    l,
		log:     g.opts.Logger.With("mode", "shared"),
		result:  hs.result,
		members: make(map[*member]bool),
		calls:   make(map[jsonrpc.ID]*call),
		tokens:  make(map[string]*call),
		fromUp:  make(map[jsonrpc.ID]routed),
		subs:    make(map[string]map[*member]bool),
	}
	// Nobody is connected yet to hear what the upstream said early.
	l.start(h, nil)
	return h, nil
}

func (h *hub) close() { h.link.close() }

func (m *member) idleSince() time.Time {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	return m.last
}

func (m *member) busy() bool {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	return m.inflight > 0
}

func (m *member) end() { m.conn.Close() }

// send queues msg for the client; it gives up if the client has left.
func (m *member) send(msg jsonrpc.Message) {
	select {
	case m.out <- msg:
	case <-m.done:
	}
}

func (m *member) write(ctx context.Context) {
	for {
		select {
		case msg := <-m.out:
			if err := m.conn.Write(ctx, msg); err != nil {
				m.log.Debug("message not delivered to the client", "err", err)
			}
		case <-m.done:
			return
		}
	}
}

// serve runs one client session until it ends.
func (h *hub) serve(c clientConn) {
	ctx := h.g.ctx
	defer c.Close()
	first, err := c.Read(ctx)
	if err != nil {
		return
	}
	init, ok := first.(*jsonrpc.Request)
	if !ok || init.Method != "initialize" || !init.IsCall() {
		h.log.Warn("client session did not start with initialize", "message", fmt.Sprintf("%T", first))
		if ok {
			refuse(ctx, c, init, jsonrpc.CodeInvalidRequest, "the session must start with initialize")
		}
		return
	}
	m := &member{
		h:    h,
		conn: c,
		log:  h.log.With("client", c.Client().Hex()[:12]),
		out:  make(chan jsonrpc.Message, outboxSize),
		done: make(chan struct{}),
		last: time.Now(),
	}
	var p struct {
		Capabilities clientCaps `json:"capabilities"`
	}
	json.Unmarshal(init.Params, &p)
	m.caps = p.Capabilities
	if err := h.g.track(m, false); err != nil {
		refuse(ctx, c, init, CodeBusy, "%v", err)
		return
	}
	defer h.g.untrack(m)

	var writer sync.WaitGroup
	writer.Go(func() { m.write(ctx) })
	h.mu.Lock()
	h.members[m] = true
	result := h.result
	h.mu.Unlock()
	defer func() {
		h.leave(m)
		close(m.done)
		writer.Wait()
	}()
	m.send(&jsonrpc.Response{ID: init.ID, Result: result})
	h.g.metrics.answered(init.Method, time.Now(), "ok")

	for {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		h.fromClient(m, msg)
	}
}

func (h *hub) fromClient(m *member, msg jsonrpc.Message) {
	switch r := msg.(type) {
	case *jsonrpc.Request:
		h.mu.Lock()
		m.last = time.Now()
		h.mu.Unlock()
		if !r.IsCall() {
			h.notificationFromClient(m, r)
			return
		}
		h.requestFromClient(m, r)
	case *jsonrpc.Response:
		// A client's answer to a request of the upstream's.
		h.mu.Lock()
		to, ok := h.fromUp[r.ID]
		if ok && to.m == m {
			delete(h.fromUp, r.ID)
		}
		h.mu.Unlock()
		if !ok || to.m != m {
			m.log.Debug("dropping an answer to no request routed to this client", "id", r.ID.Raw())
			return
		}
		if err := h.link.write(to.gen, r); err != nil {
			m.log.Debug("answer not delivered upstream", "err", err)
		}
	}
}

func (h *hub) notificationFromClient(m *member, r *jsonrpc.Request) {
	gen, up := h.link.current()
	if !up {
		return
	}
	switch r.Method {
	case "notifications/initialized":
		return // the gateway sent its own, once
	case "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(r.Params, &p) != nil {
			return
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return
		}
		upID, ok := h.callOf(m, id)
		if !ok {
			return
		}
		params, err := withMember(r.Params, upID.Raw(), "requestId")
		if err != nil {
			return
		}
		r = &jsonrpc.Request{Method: r.Method, Params: params}
	}
	if err := h.link.write(gen, r); err != nil {
		m.log.Debug("notification not delivered upstream", "method", r.Method, "err", err)
	}
}

// callOf finds the upstream id of a request of m's.
func (h *hub) callOf(m *member, origID jsonrpc.ID) (jsonrpc.ID, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for upID, c := range h.calls {
		if c.m == m && c.origID == origID {
			return upID, true
		}
	}
	return jsonrpc.ID{}, false
}

func (h *hub) requestFromClient(m *member, r *jsonrpc.Request) {
	ctx := h.g.ctx
	c := &call{m: m, origID: r.ID, method: r.Method, start: time.Now()}
	switch r.Method {
	case "initialize":
		m.send(errorResponse(r.ID, jsonrpc.CodeInvalidRequest, "the session is already initialized"))
		return
	case "resources/subscribe", "resources/unsubscribe":
		// The upstream is subscribed once per resource, on behalf of all.
		c.uri = paramString(r.Params, "uri")
		if !h.countSubscription(m, c.uri, r.Method == "resources/subscribe") {
			h.g.metrics.answered(r.Method, c.start, "ok")
			m.send(&jsonrpc.Response{ID: r.ID, Result: json.RawMessage(`{}`)})
			return
		}
	}
	if _, err := h.forward(c, r.Method, r.Params); err != nil {
		h.g.metrics.answered(r.Method, c.start, "upstream_down")
		refuse(ctx, m.conn, r, CodeUpstreamUnavailable, "%v", err)
	}
}

// countSubscription records that m subscribed to (or unsubscribed from)
// uri and reports whether the upstream must hear of it: the first
// subscriber subscribes it, the last one to leave unsubscribes it.
func (h *hub) countSubscription(m *member, uri string, on bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.subs[uri]
	if on {
		if subs == nil {
			subs = make(map[*member]bool)
			h.subs[uri] = subs
		}
		first := len(subs) == 0
		subs[m] = true
		return first
	}
	if !subs[m] {
		return false
	}
	delete(subs, m)
	if len(subs) == 0 {
		delete(h.subs, uri)
		return true
	}
	return false
}

// forward sends a request upstream under an id (and progress token) of the
// gateway's, remembering whose it is.
func (h *hub) forward(c *call, method string, params json.RawMessage) (jsonrpc.ID, error) {
	gen, up := h.link.current()
	if !up {
		return jsonrpc.ID{}, fmt.Errorf("%v; the gateway is restarting it, retry shortly", h.link.downReason())
	}
	h.mu.Lock()
	h.next++
	upID := mustID(h.next)
	c.gen = gen
	if tok, ok := progressToken(params); ok && c.m != nil {
		upToken := fmt.Sprintf("cvm-gateway-%d", h.next)
		if p, err := withMember(params, upToken, "_meta", "progressToken"); err == nil {
			params, c.token, c.upToken = p, tok, tokenKey(upToken)
			h.tokens[c.upToken] = c
		}
	}
	h.calls[upID] = c
	if c.m != nil {
		c.m.inflight++
	}
	h.mu.Unlock()
	if err := h.link.write(gen, &jsonrpc.Request{ID: upID, Method: method, Params: params}); err != nil {
		if _, ok := h.takeCall(upID); ok {
			return upID, err
		}
	}
	return upID, nil
}

// takeCall removes an answered call from the books.
func (h *hub) takeCall(upID jsonrpc.ID) (*call, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.takeCallLocked(upID)
}

func (h *hub) takeCallLocked(upID jsonrpc.ID) (*call, bool) {
	c, ok := h.calls[upID]
	if !ok {
		return nil, false
	}
	delete(h.calls, upID)
	if c.upToken != "" {
		delete(h.tokens, c.upToken)
	}
	if c.m != nil {
		c.m.inflight--
	}
	return c, true
}

func (h *hub) fromUpstream(gen uint64, msg jsonrpc.Message) {
	switch r := msg.(type) {
	case *jsonrpc.Response:
		c, ok := h.takeCall(r.ID)
		if !ok {
			h.log.Debug("dropping an upstream answer to no request in flight", "id", r.ID.Raw())
			return
		}
		if c.internal {
			if r.Error != nil {
				h.log.Warn("upstream refused a request of the gateway's", "method", c.method, "err", r.Error)
			}
			return
		}
		outcome := "ok"
		if r.Error != nil {
			outcome = "error"
			if c.method == "resources/subscribe" {
				h.countSubscription(c.m, c.uri, false)
			}
		}
		h.g.metrics.answered(c.method, c.start, outcome)
		c.m.send(&jsonrpc.Response{ID: c.origID, Result: r.Result, Error: r.Error})
	case *jsonrpc.Request:
		if r.IsCall() {
			h.requestFromUpstream(gen, r)
		} else {
			h.notificationFromUpstream(r)
		}
	}
}

// requestFromUpstream routes a request of the upstream's to a client: the
// one client with requests in flight, since the request is almost surely
// part of handling one of them. Anything else would be a guess.
func (h *hub) requestFromUpstream(gen uint64, r *jsonrpc.Request) {
	if r.Method == "ping" {
		// The upstream's client is the gateway, which is alive.
		h.link.write(gen, &jsonrpc.Response{ID: r.ID, Result: json.RawMessage(`{}`)})
		return
	}
	h.mu.Lock()
	target, why := h.routeLocked(r.Method)
	if target != nil {
		h.fromUp[r.ID] = routed{m: target, gen: gen}
	}
	h.mu.Unlock()
	if target == nil {
		h.g.metrics.refused.WithLabelValues("unroutable").Inc()
		h.log.Info("refused a request of the upstream's", "method", r.Method, "why", why)
		h.link.write(gen, errorResponse(r.ID, jsonrpc.CodeInternalError, "cvm gateway (shared session mode) cannot deliver %s: %s", r.Method, why))
		return
	}
	target.send(r)
}

func (h *hub) routeLocked(method string) (*member, string) {
	var target *member
	n := 0
	for m := range h.members {
		if m.inflight > 0 {
			target = m
			n++
		}
	}
	switch {
	case n == 0:
		return nil, "no client has a request in flight, so there is nobody to ask"
	case n > 1:
		return nil, fmt.Sprintf("%d clients have requests in flight and nothing says which one this is for; run the gateway with --session-mode per-client", n)
	}
	var declared json.RawMessage
	switch method {
	case "sampling/createMessage":
		declared = target.caps.Sampling
	case "elicitation/create":
		declared = target.caps.Elicitation
	case "roots/list":
		declared = target.caps.Roots
	default:
		return target, ""
	}
	if len(declared) == 0 || string(declared) == "null" {
		return nil, "the client with a request in flight did not declare that capability"
	}
	return target, ""
}

func (h *hub) notificationFromUpstream(r *jsonrpc.Request) {
	switch r.Method {
	case "notifications/progress":
		tok, _ := progressToken(r.Params)
		h.mu.Lock()
		c := h.tokens[tokenKey(tok)]
		h.mu.Unlock()
		if c == nil {
			return
		}
		params, err := withMember(r.Params, c.token, "progressToken")
		if err != nil {
			return
		}
		c.m.send(&jsonrpc.Request{Method: r.Method, Params: params})
	case "notifications/resources/updated":
		h.mu.Lock()
		var to []*member
		for m := range h.subs[paramString(r.Params, "uri")] {
			to = append(to, m)
		}
		h.mu.Unlock()
		for _, m := range to {
			m.send(r)
		}
	case "notifications/cancelled":
		// The upstream gave up on a request it routed to a client.
		var p struct {
			RequestID any `json:"requestId"`
		}
		json.Unmarshal(r.Params, &p)
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return
		}
		h.mu.Lock()
		to, ok := h.fromUp[id]
		delete(h.fromUp, id)
		h.mu.Unlock()
		if ok {
			to.m.send(r)
		}
	default:
		// list_changed, log messages and the like concern everyone.
		h.mu.Lock()
		to := make([]*member, 0, len(h.members))
		for m := range h.members {
			to = append(to, m)
		}
		h.mu.Unlock()
		for _, m := range to {
			m.send(r)
		}
	}
}

// leave forgets a client session that ended: its requests are cancelled
// upstream, requests routed to it are answered with an error, and
// resources only it subscribed to are unsubscribed.
func (h *hub) leave(m *member) {
	h.mu.Lock()
	delete(h.members, m)
	var cancelled []jsonrpc.ID
	for upID, c := range h.calls {
		if c.m == m {
			h.takeCallLocked(upID)
			cancelled = append(cancelled, upID)
		}
	}
	var unanswered []routed
	var unansweredIDs []jsonrpc.ID
	for id, to := range h.fromUp {
		if to.m == m {
			delete(h.fromUp, id)
			unanswered = append(unanswered, to)
			unansweredIDs = append(unansweredIDs, id)
		}
	}
	var drop []string
	for uri, subs := range h.subs {
		if subs[m] {
			delete(subs, m)
			if len(subs) == 0 {
				delete(h.subs, uri)
				drop = append(drop, uri)
			}
		}
	}
	h.mu.Unlock()

	gen, up := h.link.current()
	if !up {
		return
	}
	for _, id := range cancelled {
		params, _ := json.Marshal(map[string]any{"requestId": id.Raw(), "reason": "the client went away"})
		h.link.write(gen, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
	}
	for i, to := range unanswered {
		h.link.write(to.gen, errorResponse(unansweredIDs[i], jsonrpc.CodeInternalError, "the client this request was routed to went away"))
	}
	for _, uri := range drop {
		h.internal("resources/unsubscribe", uri)
	}
}

// internal sends a request of the gateway's own about uri; its answer goes
// nowhere.
func (h *hub) internal(method, uri string) {
	params, _ := json.Marshal(map[string]string{"uri": uri})
	if _, err := h.forward(&call{method: method, uri: uri, start: time.Now(), internal: true}, method, params); err != nil {
		h.log.Warn("could not update an upstream subscription", "method", method, "uri", uri, "err", err)
	}
}

// upstreamDown answers every request in flight on connection gen with an
// error.
func (h *hub) upstreamDown(gen uint64, why error) {
	h.mu.Lock()
	var dead []*call
	for upID, c := range h.calls {
		if c.gen == gen {
			h.takeCallLocked(upID)
			if !c.internal {
				dead = append(dead, c)
			}
		}
	}
	clear(h.fromUp)
	h.mu.Unlock()
	for _, c := range dead {
		h.g.metrics.answered(c.method, c.start, "upstream_down")
		c.m.send(errorResponse(c.origID, CodeUpstreamUnavailable, "%v with this request in flight; the gateway is restarting it", why))
	}
}

// upstreamRestarted takes the new initialize result for clients still to
// come and subscribes the new session to every resource someone watches.
func (h *hub) upstreamRestarted(_ uint64, result json.RawMessage) {
	h.mu.Lock()
	h.result = result
	uris := make([]string, 0, len(h.subs))
	for uri := range h.subs {
		uris = append(uris, uri)
	}
	h.mu.Unlock()
	for _, uri := range uris {
		h.internal("resources/subscribe", uri)
	}
}
