package participant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpcConn is what both kinds of per-peer mcp.Connection share: a queue of
// messages from the peer, and the envelope ids of the peer's requests so
// that each answer carries its correlation_id.
type rpcConn struct {
	c    *Client
	peer string
	q    *msgQueue

	mu       sync.Mutex
	incoming map[jsonrpc.ID]string   // JSON-RPC id of a request from the peer -> its envelope id
	tokens   map[mcpmsg.Token]string // progress token of such a request -> its envelope id
}

func newRPCConn(c *Client, peer string) rpcConn {
	return rpcConn{c: c, peer: peer, q: newMsgQueue(), incoming: map[jsonrpc.ID]string{}, tokens: map[mcpmsg.Token]string{}}
}

// Read implements mcp.Connection.
func (r *rpcConn) Read(ctx context.Context) (jsonrpc.Message, error) { return r.q.pop(ctx.Done()) }

// SessionID implements mcp.Connection; the MCPx session is the pair of
// participant ids, which the connection's peer names.
func (r *rpcConn) SessionID() string { return "" }

// receive queues a message from the peer, remembering a request's envelope.
func (r *rpcConn) receive(e *mcpx.Envelope, m *jsonrpc.Request) {
	if m.IsCall() {
		r.mu.Lock()
		r.incoming[m.ID] = e.ID
		if tok, ok := mcpmsg.ProgressToken(m); ok {
			r.tokens[tok] = e.ID
		}
		r.mu.Unlock()
	}
	r.q.push(m)
}

func (r *rpcConn) incomingEnvelope(id jsonrpc.ID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	envID, ok := r.incoming[id]
	return envID, ok
}

// write sends a message to the peer on behalf of s. Requests are tracked
// as pending with s as their sink. Failures that concern one message are
// reported to s, not returned: a Write error would end the whole go-sdk
// session.
func (r *rpcConn) write(ctx context.Context, msg jsonrpc.Message, s sink, related string) error {
	c := r.c
	switch m := msg.(type) {
	case *jsonrpc.Response:
		r.mu.Lock()
		envID, ok := r.incoming[m.ID]
		delete(r.incoming, m.ID)
		for tok, id := range r.tokens {
			if id == envID {
				delete(r.tokens, tok)
			}
		}
		r.mu.Unlock()
		if !ok {
			c.log.Warn("dropping an answer to a request the peer never sent", "peer", r.peer, "id", m.ID.Raw())
			return nil
		}
		payload, err := encodeRPC(m)
		if err != nil {
			return err
		}
		return r.sendErr(c.send(ctx, c.envelope([]string{r.peer}, payload, envID)))
	case *jsonrpc.Request:
		if m.IsCall() {
			if _, err := c.startRequest(ctx, r.peer, m, s, related); err != nil {
				if errors.Is(err, mcp.ErrConnectionClosed) {
					return err
				}
				r.q.push(mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "mcpx: %s to %s not sent: %v", m.Method, r.peer, err))
			}
			return nil
		}
		if m.Method == mcpmsg.MethodCancelled {
			c.cancelFor(s, m.Params)
			return nil
		}
		correlation := ""
		if m.Method == mcpmsg.MethodProgress {
			if tok, ok := mcpmsg.ProgressToken(m); ok {
				r.mu.Lock()
				correlation = r.tokens[tok]
				r.mu.Unlock()
			}
		}
		payload, err := encodeRPC(m)
		if err != nil {
			return err
		}
		return r.sendErr(c.send(ctx, c.envelope([]string{r.peer}, payload, correlation)))
	}
	return fmt.Errorf("mcpx: unknown message type %T", msg)
}

// sendErr keeps only the errors that mean the connection is over.
func (r *rpcConn) sendErr(err error) error {
	if err == nil || errors.Is(err, mcp.ErrConnectionClosed) {
		return err
	}
	r.c.log.Debug("message to peer not sent", "peer", r.peer, "err", err)
	return nil
}

// The sink methods: outcomes of requests sent through this connection go
// back to its reader.
func (r *rpcConn) response(_ *pending, m *jsonrpc.Response) { r.q.push(m) }
func (r *rpcConn) progress(_ *pending, m *jsonrpc.Request)  { r.q.push(m) }
func (r *rpcConn) fail(p *pending, err error) {
	r.q.push(mcpmsg.ErrorResponse(p.origID, errCode(err), "%v", err))
}

// PeerServer answers the MCP traffic peers address to this participant as an
// MCP server.
type PeerServer interface {
	// ServePeer is called once per peer, in a goroutine the Client owns,
	// when the peer first sends this participant a server-side message
	// (usually initialize). It should read conn until Read fails and
	// return; conn closes when the peer leaves the topic or the client
	// closes. The same conn lasts across the peer's reconnects: a repeated
	// initialize on it is answered with the first result, so work in
	// flight survives (a new connection of the peer would otherwise have
	// to start a new session and lose its answers).
	ServePeer(ctx context.Context, conn *PeerConn) error
}

// SDKServer makes a go-sdk server a participant's PeerServer: each peer gets
// its own mcp.ServerSession.
func SDKServer(s *mcp.Server) PeerServer { return sdkServer{s} }

type sdkServer struct{ s *mcp.Server }

func (a sdkServer) ServePeer(ctx context.Context, conn *PeerConn) error {
	ss, err := a.s.Connect(ctx, connTransport{conn}, nil)
	if err != nil {
		return err
	}
	return ss.Wait()
}

// connTransport is an mcp.Transport whose connection already exists.
type connTransport struct{ conn mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

// PeerConn is the server side of one peer's MCP session with this
// participant, as an mcp.Connection: Read yields what the peer sends this
// participant's server; Write answers it (each response correlated with
// its request's envelope), notifies it, or asks it something (sampling),
// tracked until its answer comes back through Read.
type PeerConn struct {
	rpcConn
	once sync.Once

	// The first initialize and its result, to answer a repeated one.
	initID     jsonrpc.ID
	initResult json.RawMessage
	reinit     bool // a repeated initialize was answered; swallow its initialized
}

// Peer is the participant id of the other side.
func (p *PeerConn) Peer() string { return p.peer }

// SessionID implements mcp.Connection: the peer's participant id, so that
// a go-sdk tool handler knows who calls it (req.Session.ID()).
func (p *PeerConn) SessionID() string { return p.peer }

// Write implements mcp.Connection.
func (p *PeerConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error == nil {
		p.mu.Lock()
		if p.initID.IsValid() && r.ID == p.initID && p.initResult == nil {
			p.initResult = r.Result
		}
		p.mu.Unlock()
	}
	return p.write(ctx, msg, p, "")
}

// WriteRelated sends a request to the peer that was caused by the peer's
// own request with id related (a tool call that needs sampling): the
// envelope's correlation_id names that request, so the peer can hand it to
// the session that made the call.
func (p *PeerConn) WriteRelated(ctx context.Context, req *jsonrpc.Request, related jsonrpc.ID) error {
	envID, _ := p.incomingEnvelope(related)
	return p.write(ctx, req, p, envID)
}

// Close implements mcp.Connection. The server is sent a cancellation for
// each of the peer's requests it has not answered (nobody is left to want
// the answer, and the go-sdk does not cancel a handler when its session
// ends, so one that never returned would hold its session open), then the
// connection ends. Requests this connection sent and that are still
// unanswered are failed.
func (p *PeerConn) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		var open []jsonrpc.ID
		for id := range p.incoming {
			open = append(open, id)
		}
		p.mu.Unlock()
		for _, id := range open {
			p.q.push(mcpmsg.Cancelled(id, "the session with the peer ended"))
		}
		p.q.drainThenClose()
		c := p.c
		c.mu.Lock()
		if c.servers[p.peer] == p {
			delete(c.servers, p.peer)
		}
		c.mu.Unlock()
		pend := c.pending.takeAll(func(x *pending) bool { return x.sink == sink(p) })
		for _, x := range pend {
			x.sink.fail(x, errConnClosed)
		}
	})
	return nil
}

// receive takes a server-side message from the peer, answering a repeated
// initialize and seed 002's shutdown itself.
func (p *PeerConn) receive(e *mcpx.Envelope, m *jsonrpc.Request) {
	if m.IsCall() && m.Method == mcpmsg.MethodShutdown {
		// The peer is done with this participant, but the session is not
		// its to end: MCPx has one session per pair of participants, which
		// lasts while both are present (decision 13), and behind a bridge
		// one server serves every peer. So shutdown is acknowledged and
		// nothing stops; the server never sees it.
		p.c.log.Debug("peer sent shutdown; acknowledged", "peer", p.peer)
		p.answer(e, &jsonrpc.Response{ID: m.ID, Result: []byte("{}")})
		return
	}
	p.mu.Lock()
	switch {
	case m.IsCall() && m.Method == mcpmsg.MethodInitialize && !p.initID.IsValid():
		p.initID = m.ID
	case m.IsCall() && m.Method == mcpmsg.MethodInitialize && p.initResult != nil:
		result := p.initResult
		p.reinit = true
		p.mu.Unlock()
		p.c.log.Debug("peer initialized again; answering with the session's first result", "peer", p.peer)
		p.answer(e, &jsonrpc.Response{ID: m.ID, Result: result})
		return
	case !m.IsCall() && m.Method == mcpmsg.MethodInitialized && p.reinit:
		p.reinit = false
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.rpcConn.receive(e, m)
}

// answer sends resp to the peer, correlated with the request envelope e,
// from a goroutine of the client's: receive runs on the receive goroutine,
// which must not wait for a send.
func (p *PeerConn) answer(e *mcpx.Envelope, resp *jsonrpc.Response) {
	payload, err := encodeRPC(resp)
	if err != nil {
		return
	}
	c := p.c
	c.goOwned(func() {
		ctx, cancel := context.WithTimeout(c.ctx, cancelNotifyTimeout)
		defer cancel()
		if err := c.send(ctx, c.envelope([]string{p.peer}, payload, e.ID)); err != nil {
			c.log.Debug("answer not sent", "peer", p.peer, "err", err)
		}
	})
}

// serverConn returns the server-side connection of peer, starting the
// Server on a new one.
func (c *Client) serverConn(peer string) *PeerConn {
	c.mu.Lock()
	if p := c.servers[peer]; p != nil {
		c.mu.Unlock()
		return p
	}
	p := &PeerConn{rpcConn: newRPCConn(c, peer)}
	c.servers[peer] = p
	c.mu.Unlock()
	if !c.goOwned(func() {
		defer p.Close()
		if err := c.opts.Server.ServePeer(c.ctx, p); err != nil && c.ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			c.log.Info("serving a peer ended", "peer", peer, "err", err)
		}
	}) {
		p.Close()
	}
	return p
}

// PeerTransport presents peer as an MCP server to a go-sdk client:
//
//	cs, err := mcp.NewClient(impl, opts).Connect(ctx, client.PeerTransport("robot-alpha"), nil)
//
// All sessions with the same peer share this participant's one MCP session
// with it (MCPx has one per pair of participants): the first to connect
// performs the handshake with its own initialize parameters, the others
// get the same result, and each request's id and progress token are
// rewritten on the wire so that answers reach the session that asked.
// Requests the peer sends back (sampling, elicitation) go to the session
// whose call caused them, when the peer says which (a cvm bridge does),
// else to the newest session.
func (c *Client) PeerTransport(peer string) mcp.Transport { return &peerTransport{c: c, peer: peer} }

type peerTransport struct {
	c    *Client
	peer string
}

func (t *peerTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	s := &clientSideConn{rpcConn: newRPCConn(t.c, t.peer)}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errConnClosed
	}
	c.sessions[t.peer] = append(c.sessions[t.peer], s)
	return s, nil
}

// clientSideConn is a go-sdk client session's connection to one peer.
type clientSideConn struct {
	rpcConn
	once       sync.Once
	initParams json.RawMessage // from the session's initialize, for handshakes after the peer reconnects
}

// Write implements mcp.Connection.
func (s *clientSideConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	m, ok := msg.(*jsonrpc.Request)
	if !ok {
		return s.write(ctx, msg, s, "")
	}
	switch {
	case m.IsCall() && m.Method == methodDiscover:
		// The go-sdk's newest protocol probes with server/discover; MCPx v0
		// peers speak the initialize handshake (seed 001 §4.1), which the
		// go-sdk falls back to on "method not found".
		s.q.push(mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "server/discover is not used in MCPx v0; initialize instead"))
		return nil
	case m.IsCall() && m.Method == mcpmsg.MethodInitialize:
		s.mu.Lock()
		s.initParams = m.Params
		s.mu.Unlock()
		res, err := s.c.ensure(ctx, s.peer, m.Params)
		if err != nil {
			if werr, ok := wireError(err); ok {
				s.q.push(&jsonrpc.Response{ID: m.ID, Error: werr})
			} else {
				s.q.push(mcpmsg.ErrorResponse(m.ID, errCode(err), "%v", err))
			}
			return nil
		}
		s.q.push(&jsonrpc.Response{ID: m.ID, Result: res})
		return nil
	case !m.IsCall() && m.Method == mcpmsg.MethodInitialized:
		return nil // sent by the shared handshake
	case m.IsCall() && m.Method != mcpmsg.MethodPing:
		s.mu.Lock()
		params := s.initParams
		s.mu.Unlock()
		if _, err := s.c.ensure(ctx, s.peer, params); err != nil {
			s.q.push(mcpmsg.ErrorResponse(m.ID, errCode(err), "%v", err))
			return nil
		}
	}
	return s.write(ctx, m, s, "")
}

// Close implements mcp.Connection.
func (s *clientSideConn) Close() error {
	s.once.Do(func() {
		s.q.close()
		c := s.c
		c.mu.Lock()
		list := c.sessions[s.peer]
		for i, x := range list {
			if x == s {
				c.sessions[s.peer] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(c.sessions[s.peer]) == 0 {
			delete(c.sessions, s.peer)
		}
		c.mu.Unlock()
		pend := c.pending.takeAll(func(x *pending) bool { return x.sink == sink(s) })
		for _, p := range pend {
			c.goOwned(func() { c.sendCancelled(p, "session closed") })
		}
	})
	return nil
}
