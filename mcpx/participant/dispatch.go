package participant

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// absentGrace is how long a peer missing from the welcome after our
// reconnect keeps its requests and sessions: after a gateway restart the
// others reconnect one by one, and a peer that is merely slower than us
// must not have its answers thrown away.
const absentGrace = 30 * time.Second

// handleFrame dispatches one frame from the gateway, live or (replay) read
// from history while resuming. It runs on the receive goroutine.
func (c *Client) handleFrame(data []byte, replay bool) {
	e, err := mcpx.DecodeDelivered(data)
	if err != nil {
		c.log.Debug("ignoring a frame that is not an envelope", "err", err)
		return
	}
	switch e.Kind {
	case mcpx.KindPresence:
		if e.From == mcpx.GatewayID {
			c.onPresence(e)
		}
		return
	case mcpx.KindSystem:
		if e.From == mcpx.GatewayID {
			c.onSystem(e)
		}
		return
	}
	c.mu.Lock()
	if e.Seq != 0 {
		if e.Seq <= c.lastSeq {
			c.mu.Unlock()
			return // seen already: live after a resume, or history twice
		}
		c.lastSeq = e.Seq
	}
	self := c.self.ID
	if e.From == self {
		c.out.settle(e.ID, nil)
	}
	c.mu.Unlock()
	msg, err := jsonrpc.DecodeMessage(e.Payload)
	if err != nil {
		c.log.Debug("ignoring an mcp envelope that is not JSON-RPC", "envelope", e.ID, "err", err)
		return
	}
	if e.From == self {
		// Our own broadcast, echoed (or replayed); our directed envelopes
		// show up only when replayed. Only chat means anything to us.
		if r, ok := msg.(*jsonrpc.Request); ok && r.Method == methodChat && e.Broadcast() {
			c.emitChat(e, r, replay)
		}
		return
	}
	if !e.Broadcast() && !contains(e.To, self) {
		return // addressed to others; seen because visibility is topic-wide
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		c.onResponse(e, m)
	case *jsonrpc.Request:
		c.onRequest(e, m, replay)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *Client) onRequest(e *mcpx.Envelope, m *jsonrpc.Request, replay bool) {
	if m.IsCall() {
		if len(e.To) != 1 {
			return // requests must name exactly one recipient: us alone
		}
		if mcpmsg.ClientSide(m.Method) {
			c.toClientSide(e, m)
		} else {
			c.serverConn(e.From).receive(e, m)
		}
		return
	}
	switch m.Method {
	case methodChat:
		c.emitChat(e, m, replay)
	case mcpmsg.MethodProgress:
		if !c.onProgress(e, m) {
			c.log.Debug("progress for no request of ours", "from", e.From)
		}
	case mcpmsg.MethodCancelled:
		c.onCancelled(e, m)
	case mcpmsg.MethodInitialized, mcpmsg.MethodRootsChanged:
		c.serverConn(e.From).receive(e, m)
	default:
		// Server notifications (list_changed, logging, resources/updated):
		// every session this participant has with the sender hears them.
		c.mu.Lock()
		sessions := append([]*clientSideConn(nil), c.sessions[e.From]...)
		c.mu.Unlock()
		for _, s := range sessions {
			s.q.push(m)
		}
		c.emit(Event{Type: EventNotification, Envelope: e, Method: m.Method, Replayed: replay})
	}
}

// onCancelled routes a peer's notifications/cancelled to the session that
// received the request: the correlation_id says which when the peer sets
// it; otherwise the JSON-RPC id is looked up, server side first.
func (c *Client) onCancelled(e *mcpx.Envelope, m *jsonrpc.Request) {
	id, _, ok := mcpmsg.CancelledRequest(m.Params)
	if !ok {
		return
	}
	c.mu.Lock()
	var targets []*rpcConn
	if s := c.servers[e.From]; s != nil {
		targets = append(targets, &s.rpcConn)
	}
	for _, s := range c.sessions[e.From] {
		targets = append(targets, &s.rpcConn)
	}
	c.mu.Unlock()
	var byID *rpcConn
	for _, t := range targets {
		envID, has := t.incomingEnvelope(id)
		if !has {
			continue
		}
		if e.CorrelationID != "" && envID == e.CorrelationID {
			t.q.push(m)
			return
		}
		if byID == nil {
			byID = t
		}
	}
	if byID != nil {
		byID.q.push(m)
	}
}

// toClientSide hands a request a peer sends us as our server (sampling,
// elicitation, roots) to one of our client sessions with that peer: the
// one whose call caused it, when the peer says so with correlation_id,
// else the newest.
func (c *Client) toClientSide(e *mcpx.Envelope, m *jsonrpc.Request) {
	c.mu.Lock()
	var target *clientSideConn
	if p := c.pending.sentIn(e.CorrelationID); p != nil {
		if s, ok := p.sink.(*clientSideConn); ok && s.peer == e.From {
			target = s
		}
	}
	if list := c.sessions[e.From]; target == nil && len(list) > 0 {
		target = list[len(list)-1]
	}
	c.mu.Unlock()
	if target != nil {
		target.receive(e, m)
		return
	}
	resp, _ := encodeRPC(mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound,
		"%s: %s has no MCP client session with you that could answer it", m.Method, c.Self().ID))
	c.goOwned(func() {
		ctx, cancel := context.WithTimeout(c.ctx, cancelNotifyTimeout)
		defer cancel()
		c.send(ctx, c.envelope([]string{e.From}, resp, e.ID))
	})
}

func (c *Client) onPresence(e *mcpx.Envelope) {
	var p mcpx.Presence
	if json.Unmarshal(e.Payload, &p) != nil || p.Participant.ID == "" {
		return
	}
	id := p.Participant.ID
	c.mu.Lock()
	if id == c.self.ID {
		c.mu.Unlock()
		return // our own join (reference compat) or heartbeat
	}
	_, known := c.roster[id]
	switch p.Event {
	case mcpx.PresenceJoin, mcpx.PresenceHeartbeat:
		c.roster[id] = p.Participant
		delete(c.absent, id) // back: no longer awaited
		if p.Event == mcpx.PresenceJoin {
			if ps := c.peers[id]; ps != nil {
				ps.invalidate()
			}
		}
	case mcpx.PresenceLeave:
		delete(c.roster, id)
		delete(c.absent, id) // it said it left: no longer awaited
		if ps := c.peers[id]; ps != nil {
			ps.invalidate()
		}
	}
	c.mu.Unlock()
	switch {
	case p.Event == mcpx.PresenceJoin || (p.Event == mcpx.PresenceHeartbeat && !known):
		c.emit(Event{Type: EventJoin, Participant: p.Participant})
	case p.Event == mcpx.PresenceLeave:
		// A replaced connection is followed by its successor's join: the
		// peer is still here, and its answers may still come.
		if p.Reason != mcpx.LeaveReplaced {
			c.peerGone(id)
		}
		c.emit(Event{Type: EventLeave, Participant: p.Participant, Reason: p.Reason})
	}
}

// peerGone ends everything this participant has with a peer that left:
// its requests fail with ErrPeerLeft, its sessions (both sides) close.
func (c *Client) peerGone(id string) {
	pend := c.pending.takeAll(func(p *pending) bool { return p.peer == id })
	c.mu.Lock()
	server := c.servers[id]
	delete(c.servers, id)
	sessions := c.sessions[id]
	delete(c.sessions, id)
	if ps := c.peers[id]; ps != nil {
		ps.invalidate()
	}
	c.mu.Unlock()
	for _, p := range pend {
		p.sink.fail(p, ErrPeerLeft)
	}
	if server != nil {
		server.Close()
	}
	for _, s := range sessions {
		s.Close()
	}
}

// peerAbsent gives a peer missing after our reconnect absentGrace to come
// back before it counts as gone.
func (c *Client) peerAbsent(id string) {
	c.mu.Lock()
	c.absent[id]++
	c.mu.Unlock()
	c.goOwned(func() {
		t := time.NewTimer(absentGrace)
		defer t.Stop()
		var done bool
		select {
		case <-t.C:
		case <-c.ctx.Done():
			done = true
		}
		c.mu.Lock()
		if c.absent[id]--; c.absent[id] <= 0 {
			delete(c.absent, id)
		}
		_, back := c.roster[id]
		c.mu.Unlock()
		if !back && !done {
			c.peerGone(id)
		}
	})
}

// awaited reports whether a request sent in envelope envID is to a peer
// missing after our reconnect and still in its grace: the gateway's
// unknown_recipient for it only says the peer is not back yet. The
// envelope is stored, so the peer reads it from history when it comes
// back, and answers; if it does not, peerAbsent fails the request.
func (c *Client) awaited(envID string) bool {
	p := c.pending.sentIn(envID)
	if p == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.absent[p.peer] > 0
}

// onSystem handles the gateway's system envelopes addressed to us: errors
// about envelopes we sent.
func (c *Client) onSystem(e *mcpx.Envelope) {
	var p struct {
		Event        string    `json:"event"`
		Type         string    `json:"type"`
		Code         mcpx.Code `json:"code"`
		Message      string    `json:"message"`
		RetryAfterMS int64     `json:"retry_after_ms"`
	}
	if json.Unmarshal(e.Payload, &p) != nil || (p.Event != "error" && p.Type != "error") {
		return
	}
	gerr := &GatewayError{Code: p.Code, Message: p.Message, RetryAfter: time.Duration(p.RetryAfterMS) * time.Millisecond}
	if p.Code == mcpx.CodeRateLimited && e.CorrelationID != "" && c.rateLimited(e.CorrelationID, max(gerr.RetryAfter, time.Millisecond)) {
		c.log.Debug("rate limited; sending again", "envelope", e.CorrelationID, "after", gerr.RetryAfter)
		return
	}
	c.mu.Lock()
	// Refused or (unknown_recipient) stored: either way, settled.
	c.out.settle(e.CorrelationID, gerr)
	c.mu.Unlock()
	if p.Code == mcpx.CodeUnknownRecipient && c.awaited(e.CorrelationID) {
		c.log.Debug("request stored for a peer not back yet; still waiting", "envelope", e.CorrelationID)
		return
	}
	p2, ok := c.pending.takeEnvelope(e.CorrelationID)
	if ok {
		p2.sink.fail(p2, gerr)
	}
	c.log.Debug("the gateway refused an envelope", "envelope", e.CorrelationID, "code", p.Code, "msg", p.Message)
	c.emit(Event{Type: EventError, Envelope: e, Err: gerr})
}
