package participant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// cancelNotifyTimeout bounds the best-effort notifications/cancelled sent
// for a request given up on: a caller's return must not wait for a gateway
// that is away.
const cancelNotifyTimeout = 5 * time.Second

// sink receives the outcome of a request this participant sent: the
// caller's go-sdk session, a Request call, or a server-side PeerConn that
// asked its peer something (sampling). Methods are called at most once per
// outcome, never while the client's lock is held.
type sink interface {
	response(p *pending, m *jsonrpc.Response) // m.ID is the caller's id again
	progress(p *pending, m *jsonrpc.Request)  // the caller's progress token again
	fail(p *pending, err error)               // timeout, peer gone, gateway refusal, close
}

// pending is a request sent to a peer and not yet answered. On the wire
// it carries a JSON-RPC id unique within this client and, if the caller
// asked for progress, a progress token unique within this client: several
// local sessions share one MCP session with each peer, so their ids and
// tokens could collide.
type pending struct {
	envID     string // the request envelope's id: responses correlate by it
	peer      string
	method    string
	wireID    int64
	origID    jsonrpc.ID
	token     mcpmsg.Token // the token we put on the wire, zero if none
	origToken mcpmsg.Token // the caller's token
	sink      sink
	timer     *time.Timer
}

// startRequest sends req to peer on behalf of s. related, if set, is the
// envelope id the request replies to (a sampling request caused by a
// peer's call). The request is tracked before it is sent, so even an
// immediate answer finds it.
func (c *Client) startRequest(ctx context.Context, peer string, req *jsonrpc.Request, s sink, related string) (*pending, error) {
	p := &pending{peer: peer, method: req.Method, wireID: c.pending.nextWireID(), origID: req.ID, sink: s}
	wire := &jsonrpc.Request{ID: mcpmsg.IntID(p.wireID), Method: req.Method, Params: req.Params}
	if tok, ok := mcpmsg.ProgressToken(req); ok {
		p.origToken = tok
		p.token = mcpmsg.StringToken("mcpx-" + strconv.FormatInt(p.wireID, 10))
		var err error
		if wire, err = mcpmsg.WithProgressToken(wire, p.token); err != nil {
			return nil, err
		}
	}
	payload, err := encodeRPC(wire)
	if err != nil {
		return nil, err
	}
	e := c.envelope([]string{peer}, payload, related)
	p.envID = e.ID
	if err := c.pending.add(p, c.expire); err != nil {
		return nil, err
	}
	if err := c.send(ctx, e); err != nil {
		c.pending.forget(p)
		return nil, err
	}
	return p, nil
}

// envelope builds an mcp envelope from this participant.
func (c *Client) envelope(to []string, payload json.RawMessage, correlation string) *mcpx.Envelope {
	return &mcpx.Envelope{
		Protocol:      mcpx.Protocol,
		ID:            mcpx.NewEnvelopeID(),
		TS:            time.Now().UTC().Format(mcpx.TimeLayout),
		From:          c.Self().ID,
		To:            to,
		Kind:          mcpx.KindMCP,
		CorrelationID: correlation,
		Payload:       payload,
	}
}

// expire fails a request with no answer in time and tells the peer.
func (c *Client) expire(p *pending) {
	if !c.pending.forget(p) {
		return
	}
	c.goOwned(func() { c.sendCancelled(p, "timeout") })
	p.sink.fail(p, fmt.Errorf("%w: %s to %s: no answer within %s", ErrRequestTimeout, p.method, p.peer, c.opts.RequestTimeout))
}

// sendCancelled tells p's peer that its answer is no longer wanted. The
// envelope correlates with the request's, so a peer can find it even if
// the JSON-RPC id alone were ambiguous.
func (c *Client) sendCancelled(p *pending, reason string) {
	payload, err := encodeRPC(mcpmsg.Cancelled(mcpmsg.IntID(p.wireID), reason))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, cancelNotifyTimeout)
	defer cancel()
	if err := c.send(ctx, c.envelope([]string{p.peer}, payload, p.envID)); err != nil {
		c.log.Debug("notifications/cancelled not sent", "peer", p.peer, "err", err)
	}
}

// onResponse completes the request a response envelope answers.
func (c *Client) onResponse(e *mcpx.Envelope, m *jsonrpc.Response) {
	p, ok := c.pending.takeAnswered(e.CorrelationID, e.From)
	if !ok {
		c.log.Debug("response to no request of ours", "from", e.From, "correlation_id", e.CorrelationID)
		return
	}
	if got, ok := m.ID.Raw().(int64); !ok || got != p.wireID {
		c.log.Warn("a peer answered with another JSON-RPC id than it was asked with; going by correlation_id",
			"peer", p.peer, "sent", p.wireID, "got", m.ID.Raw())
	}
	m.ID = p.origID
	p.sink.response(p, m)
}

// onProgress hands a progress notification to the request it reports on,
// with the caller's own token, and restarts that request's clock.
func (c *Client) onProgress(e *mcpx.Envelope, m *jsonrpc.Request) bool {
	tok, _ := mcpmsg.ProgressToken(m)
	p, ok := c.pending.progressed(tok, e.From)
	if !ok {
		return false
	}
	back, err := mcpmsg.WithProgressToken(m, p.origToken)
	if err != nil {
		return false
	}
	p.sink.progress(p, back)
	return true
}

// cancelFor translates a caller's notifications/cancelled (in its own id
// space) to the request on the wire, and stops waiting for it.
func (c *Client) cancelFor(s sink, params json.RawMessage) {
	id, reason, ok := mcpmsg.CancelledRequest(params)
	if !ok {
		return
	}
	found, ok := c.pending.takeOf(s, id)
	if !ok {
		return // answered already
	}
	c.goOwned(func() { c.sendCancelled(found, reason) })
}

// callSink is the sink of Request: one outcome, on a channel.
type callSink struct {
	done chan callResult
}

type callResult struct {
	result json.RawMessage
	err    error
}

func (s *callSink) response(p *pending, m *jsonrpc.Response) {
	if m.Error != nil {
		s.done <- callResult{err: fmt.Errorf("mcpx: %s to %s: %w", p.method, p.peer, m.Error)}
		return
	}
	s.done <- callResult{result: m.Result}
}

func (s *callSink) progress(*pending, *jsonrpc.Request) {}

func (s *callSink) fail(p *pending, err error) { s.done <- callResult{err: err} }

// Request sends an MCP request to peer and returns its result. Before the
// first request to a peer (and again after the peer reconnects) it performs
// the MCP handshake, once however many callers wait for it. A JSON-RPC
// error from the peer is returned as a *jsonrpc.Error (code, message and
// data as the peer sent them). When ctx ends or Options.RequestTimeout
// passes first, the peer is sent notifications/cancelled.
func (c *Client) Request(ctx context.Context, peer, method string, params any) (json.RawMessage, error) {
	raw, err := mcpmsg.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("mcpx: %s params: %w", method, err)
	}
	if method != mcpmsg.MethodInitialize && method != mcpmsg.MethodPing {
		if _, err := c.ensure(ctx, peer, nil); err != nil {
			return nil, err
		}
	}
	return c.Call(ctx, peer, method, raw)
}

// Call sends one request to peer as it is, without the MCP handshake that
// Request performs first: for ping, for a peer this client has initialized
// already, or to see how a peer treats a request before initialize.
func (c *Client) Call(ctx context.Context, peer, method string, params json.RawMessage) (json.RawMessage, error) {
	s := &callSink{done: make(chan callResult, 1)}
	p, err := c.startRequest(ctx, peer, &jsonrpc.Request{ID: mcpmsg.IntID(0), Method: method, Params: params}, s, "")
	if err != nil {
		return nil, err
	}
	select {
	case r := <-s.done:
		return r.result, r.err
	case <-ctx.Done():
		if c.pending.forget(p) {
			c.goOwned(func() { c.sendCancelled(p, context.Cause(ctx).Error()) })
		}
		return nil, ctx.Err()
	}
}

// Notify sends an MCP notification: to one or more participants, or to
// everyone when to is empty.
func (c *Client) Notify(ctx context.Context, to []string, method string, params any) (*mcpx.Envelope, error) {
	raw, err := mcpmsg.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("mcpx: %s params: %w", method, err)
	}
	payload, err := encodeRPC(&jsonrpc.Request{Method: method, Params: raw})
	if err != nil {
		return nil, err
	}
	e := c.envelope(to, payload, "")
	return e, c.send(ctx, e)
}

// errCode is the JSON-RPC code a local failure is reported with to a
// go-sdk session.
func errCode(err error) int64 {
	if errors.Is(err, ErrRequestTimeout) {
		return mcpx.CodeRequestTimeout
	}
	return jsonrpc.CodeInternalError
}
