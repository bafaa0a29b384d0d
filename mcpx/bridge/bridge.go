package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Bridge. Zero values select the defaults given.
type Options struct {
	// Participant says how to join the topic; its Server is the bridge.
	Participant participant.Options
	// Command builds the stdio MCP server's command; it is called for
	// every start, restarts included. Required.
	Command func() *exec.Cmd
	// Stderr receives the server's stderr (default: discarded).
	Stderr io.Writer
	// ClientInfo and Capabilities are what the bridge says in its
	// initialize to the server (defaults: cvm-room-bridge; sampling and
	// elicitation, which it routes to the peer whose call caused them).
	// Roots are not offered by default: a server asks for them outside of
	// any call, so no peer could be chosen to answer.
	ClientInfo      *mcp.Implementation
	Capabilities    *mcp.ClientCapabilities
	ProtocolVersion string // default mcpx.DefaultProtocolVersion
	// RestartMin and RestartMax bound the backoff between restarts of a
	// server that exited (defaults 250 ms and 30 s, doubling; a server that
	// ran longer than RestartMax starts over at RestartMin).
	RestartMin time.Duration
	RestartMax time.Duration
	// InitTimeout bounds the server's answer to initialize (default 30 s).
	InitTimeout time.Duration
	Logger      *slog.Logger
}

// Bridge makes a stdio MCP server a participant of a topic. Unlike the
// reference bridge (notes §5) it passes the server's own initialize result
// through, relays every MCP method with its JSON-RPC error codes intact,
// remaps ids and progress tokens per peer onto its one session with the
// server, forwards the server's notifications to the peers they concern,
// routes the server's requests (sampling, elicitation) to the peer whose
// call caused them, keeps resource subscriptions per peer, and restarts a
// server that exits (failing the calls it took with it, never hanging them).
type Bridge struct {
	opts   Options
	log    *slog.Logger
	client *participant.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	child      *child // nil while restarting
	initResult json.RawMessage
	initInfo   mcp.InitializeResult
	nextUp     int64
	calls      map[int64]*upCall        // our requests to the server, by upstream id
	tokens     map[mcpmsg.Token]*upCall // ... by the progress token we gave them
	downs      map[jsonrpc.ID]*downCall // the server's requests to peers, by the server's id
	peers      map[string]*bridgePeer
	subs       map[string]int // resource URI -> peers subscribed
	logLevel   json.RawMessage
}

// child is one run of the server.
type child struct {
	conn    mcp.Connection
	cmd     *exec.Cmd
	gen     int
	started time.Time
}

// upCall is a peer's request relayed to the server.
type upCall struct {
	id        int64 // upstream
	peer      *bridgePeer
	peerID    jsonrpc.ID
	method    string
	token     mcpmsg.Token
	origToken mcpmsg.Token
	uri       string // subscribe, unsubscribe
}

// downCall is the server's request relayed to a peer.
type downCall struct {
	peer *bridgePeer
	gen  int
}

// bridgePeer is one peer's session with the bridge.
type bridgePeer struct {
	id          string
	conn        *participant.PeerConn
	initialized bool
	sampling    bool
	elicitation bool
	subs        map[string]bool
}

// StartBridge starts the server, performs the MCP handshake with it, then
// joins the topic. An error here (the command does not start, is not an MCP
// server, the gateway refuses the token) is returned; once running, the
// bridge restarts the server and reconnects to the gateway by itself.
func Start(ctx context.Context, opts Options) (*Bridge, error) {
	if opts.Command == nil {
		return nil, errors.New("mcpx: Options.Command is required")
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.ClientInfo == nil {
		opts.ClientInfo = &mcp.Implementation{Name: "cvm-room-bridge", Version: "0"}
	}
	if opts.Capabilities == nil {
		opts.Capabilities = &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}}
	}
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = mcpx.DefaultProtocolVersion
	}
	opts.RestartMin = cmp.Or(opts.RestartMin, 250*time.Millisecond)
	opts.RestartMax = cmp.Or(opts.RestartMax, 30*time.Second)
	opts.InitTimeout = cmp.Or(opts.InitTimeout, 30*time.Second)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{
		opts:   opts,
		log:    opts.Logger,
		calls:  map[int64]*upCall{},
		tokens: map[mcpmsg.Token]*upCall{},
		downs:  map[jsonrpc.ID]*downCall{},
		peers:  map[string]*bridgePeer{},
		subs:   map[string]int{},
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	ch, res, err := b.startChild(ctx, 1)
	if err != nil {
		b.cancel()
		return nil, err
	}
	b.setChild(ch, res)
	copts := opts.Participant
	copts.Server = b
	if copts.Logger == nil {
		copts.Logger = opts.Logger
	}
	b.client, err = participant.Connect(ctx, copts)
	if err != nil {
		b.cancel()
		ch.conn.Close()
		return nil, err
	}
	b.wg.Add(1)
	go b.supervise(ch)
	return b, nil
}

// Client is the bridge's participant connection.
func (b *Bridge) Client() *participant.Client { return b.client }

// ServerInfo is the initialize result of the running server.
func (b *Bridge) ServerInfo() mcp.InitializeResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.initInfo
}

// Close leaves the topic and stops the server.
func (b *Bridge) Close() error {
	b.client.Close()
	b.cancel()
	b.mu.Lock()
	ch := b.child
	b.mu.Unlock()
	if ch != nil {
		ch.conn.Close()
	}
	b.wg.Wait()
	return nil
}

func (b *Bridge) setChild(ch *child, res json.RawMessage) {
	var info mcp.InitializeResult
	json.Unmarshal(res, &info)
	b.mu.Lock()
	b.child, b.initResult, b.initInfo = ch, res, info
	b.mu.Unlock()
}

// startChild runs the command and performs the MCP handshake with it.
func (b *Bridge) startChild(ctx context.Context, gen int) (*child, json.RawMessage, error) {
	cmd := b.opts.Command()
	cmd.Stderr = b.opts.Stderr
	conn, err := (&mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}).Connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("mcpx bridge: start %s: %w", cmd.Path, err)
	}
	ch := &child{conn: conn, cmd: cmd, gen: gen, started: time.Now()}
	res, err := b.initChild(ctx, ch)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("mcpx bridge: %s: %w", cmd.Path, err)
	}
	return ch, res, nil
}

// initID is the id of the bridge's own initialize, a string so that it
// never meets the numeric ids of relayed requests.
const initID = "cvm-bridge-initialize"

func (b *Bridge) initChild(ctx context.Context, ch *child) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.InitTimeout)
	defer cancel()
	params, err := mcpmsg.Marshal(&mcp.InitializeParams{
		ProtocolVersion: b.opts.ProtocolVersion,
		ClientInfo:      b.opts.ClientInfo,
		Capabilities:    b.opts.Capabilities,
	})
	if err != nil {
		return nil, err
	}
	id, _ := jsonrpc.MakeID(initID)
	if err := ch.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: mcpmsg.MethodInitialize, Params: params}); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	for {
		msg, err := ch.conn.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("no answer to initialize: %w", err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID.Raw() != initID {
				continue
			}
			if m.Error != nil {
				return nil, fmt.Errorf("initialize refused: %w", m.Error)
			}
			if err := ch.conn.Write(ctx, &jsonrpc.Request{Method: mcpmsg.MethodInitialized}); err != nil {
				return nil, err
			}
			return m.Result, nil
		case *jsonrpc.Request:
			if m.IsCall() {
				ch.conn.Write(ctx, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "not initialized yet"))
			}
		}
	}
}

// supervise reads the server until it exits, then restarts it with
// backoff, until the bridge closes.
func (b *Bridge) supervise(ch *child) {
	defer b.wg.Done()
	backoff := b.opts.RestartMin
	for {
		err := b.readChild(ch)
		b.childExited(ch, err)
		if b.ctx.Err() != nil {
			return
		}
		if time.Since(ch.started) > b.opts.RestartMax {
			backoff = b.opts.RestartMin
		}
		for {
			b.log.Info("restarting the MCP server", "in", backoff)
			select {
			case <-time.After(backoff):
			case <-b.ctx.Done():
				return
			}
			backoff = min(backoff*2, b.opts.RestartMax)
			next, res, err := b.startChild(b.ctx, ch.gen+1)
			if err == nil {
				ch = next
				b.restarted(ch, res)
				break
			}
			if b.ctx.Err() != nil {
				return
			}
			b.log.Warn("the MCP server did not restart", "err", err)
		}
	}
}

func (b *Bridge) readChild(ch *child) error {
	for {
		msg, err := ch.conn.Read(b.ctx)
		if err != nil {
			return err
		}
		b.fromChild(ch, msg)
	}
}

// childExited fails every call the server took with it: a caller gets an
// error, never a hang.
func (b *Bridge) childExited(ch *child, readErr error) {
	ch.conn.Close() // reaps the process
	b.mu.Lock()
	b.child = nil
	calls := b.calls
	b.calls, b.tokens, b.downs = map[int64]*upCall{}, map[mcpmsg.Token]*upCall{}, map[jsonrpc.ID]*downCall{}
	b.mu.Unlock()
	if b.ctx.Err() != nil {
		return
	}
	status := "exited"
	if ch.cmd.ProcessState != nil {
		status = ch.cmd.ProcessState.String()
	}
	b.log.Warn("the MCP server exited", "status", status, "err", readErr, "calls_failed", len(calls))
	for _, c := range calls {
		if c.peer != nil {
			b.answer(c.peer, mcpmsg.ErrorResponse(c.peerID, jsonrpc.CodeInternalError,
				"the MCP server exited (%s) before answering %s; the bridge is restarting it", status, c.method))
		}
	}
}

// restarted installs a new run of the server: subscriptions and the log
// level are set again, and peers are told the lists may have changed.
func (b *Bridge) restarted(ch *child, res json.RawMessage) {
	b.setChild(ch, res)
	b.mu.Lock()
	var uris []string
	for uri := range b.subs {
		uris = append(uris, uri)
	}
	level := b.logLevel
	info := b.initInfo
	b.mu.Unlock()
	b.log.Info("the MCP server restarted", "server", info.ServerInfo)
	for _, uri := range uris {
		params, _ := mcpmsg.Marshal(map[string]string{"uri": uri})
		b.internal(ch, mcpmsg.MethodSubscribe, params)
	}
	if level != nil {
		b.internal(ch, mcpmsg.MethodSetLevel, level)
	}
	if caps := info.Capabilities; caps != nil {
		for _, n := range []struct {
			on     bool
			method string
		}{
			{caps.Tools != nil && caps.Tools.ListChanged, mcpmsg.MethodToolsChanged},
			{caps.Prompts != nil && caps.Prompts.ListChanged, mcpmsg.MethodPromptsChanged},
			{caps.Resources != nil && caps.Resources.ListChanged, mcpmsg.MethodResourcesChanged},
		} {
			if n.on {
				b.toPeers(&jsonrpc.Request{Method: n.method}, func(*bridgePeer) bool { return true })
			}
		}
	}
}

// internal sends the server a request of the bridge's own; its answer is
// dropped.
func (b *Bridge) internal(ch *child, method string, params json.RawMessage) {
	b.mu.Lock()
	b.nextUp++
	id := b.nextUp
	b.calls[id] = &upCall{id: id, method: method}
	b.mu.Unlock()
	ch.conn.Write(b.ctx, &jsonrpc.Request{ID: mcpmsg.IntID(id), Method: method, Params: params})
}

// ServePeer implements PeerServer: it relays one peer's session.
func (b *Bridge) ServePeer(ctx context.Context, conn *participant.PeerConn) error {
	p := &bridgePeer{id: conn.Peer(), conn: conn, subs: map[string]bool{}}
	b.mu.Lock()
	b.peers[p.id] = p
	b.mu.Unlock()
	defer b.peerLeft(p)
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return nil
		}
		b.fromPeer(ctx, p, msg)
	}
}

// peerLeft cancels what a departed peer had in flight and drops its
// subscriptions.
func (b *Bridge) peerLeft(p *bridgePeer) {
	b.mu.Lock()
	if b.peers[p.id] == p {
		delete(b.peers, p.id)
	}
	var cancel []int64
	for id, c := range b.calls {
		if c.peer == p {
			cancel = append(cancel, id)
			b.dropCallLocked(c)
		}
	}
	for key, d := range b.downs {
		if d.peer == p {
			delete(b.downs, key)
		}
	}
	var unsub []string
	for uri := range p.subs {
		if b.subs[uri]--; b.subs[uri] <= 0 {
			delete(b.subs, uri)
			unsub = append(unsub, uri)
		}
	}
	ch := b.child
	b.mu.Unlock()
	if ch == nil {
		return
	}
	for _, id := range cancel {
		params, _ := mcpmsg.Marshal(map[string]any{"requestId": id, "reason": "the caller left the topic"})
		ch.conn.Write(b.ctx, &jsonrpc.Request{Method: mcpmsg.MethodCancelled, Params: params})
	}
	for _, uri := range unsub {
		params, _ := mcpmsg.Marshal(map[string]string{"uri": uri})
		b.internal(ch, mcpmsg.MethodUnsubscribe, params)
	}
}

func (b *Bridge) dropCallLocked(c *upCall) {
	delete(b.calls, c.id)
	if !c.token.IsZero() {
		delete(b.tokens, c.token)
	}
}

// answer sends a response to a peer.
func (b *Bridge) answer(p *bridgePeer, m *jsonrpc.Response) {
	if err := p.conn.Write(b.ctx, m); err != nil {
		b.log.Debug("answer to peer not sent", "peer", p.id, "err", err)
	}
}

// fromPeer handles one message of a peer's session with the bridge.
func (b *Bridge) fromPeer(ctx context.Context, p *bridgePeer, msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		b.peerAnswered(p, m)
	case *jsonrpc.Request:
		if !m.IsCall() {
			b.peerNotified(p, m)
			return
		}
		switch m.Method {
		case mcpmsg.MethodInitialize:
			var params struct {
				Capabilities struct {
					Sampling    json.RawMessage `json:"sampling"`
					Elicitation json.RawMessage `json:"elicitation"`
				} `json:"capabilities"`
			}
			json.Unmarshal(m.Params, &params)
			b.mu.Lock()
			p.initialized = true
			p.sampling = !mcpmsg.IsNull(params.Capabilities.Sampling)
			p.elicitation = !mcpmsg.IsNull(params.Capabilities.Elicitation)
			res := b.initResult
			b.mu.Unlock()
			b.answer(p, &jsonrpc.Response{ID: m.ID, Result: res})
			return
		case mcpmsg.MethodPing:
			b.answer(p, &jsonrpc.Response{ID: m.ID, Result: json.RawMessage("{}")})
			return
		}
		b.mu.Lock()
		ok := p.initialized
		b.mu.Unlock()
		if !ok {
			b.answer(p, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest, "%s before initialize: send initialize first (MCPx v0 §4.1)", m.Method))
			return
		}
		b.relay(ctx, p, m)
	}
}

// relay sends a peer's request to the server under an upstream id.
func (b *Bridge) relay(ctx context.Context, p *bridgePeer, m *jsonrpc.Request) {
	var sub struct {
		URI string `json:"uri"`
	}
	if m.Method == mcpmsg.MethodSubscribe || m.Method == mcpmsg.MethodUnsubscribe {
		json.Unmarshal(m.Params, &sub)
	}
	b.mu.Lock()
	ch := b.child
	if ch == nil {
		b.mu.Unlock()
		b.answer(p, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "the MCP server is restarting; try again shortly"))
		return
	}
	// One upstream session serves every peer: a subscription is sent
	// upstream by its first subscriber and withdrawn by its last.
	switch m.Method {
	case mcpmsg.MethodSubscribe:
		if p.subs[sub.URI] || b.subs[sub.URI] > 0 {
			if !p.subs[sub.URI] {
				p.subs[sub.URI] = true
				b.subs[sub.URI]++
			}
			b.mu.Unlock()
			b.answer(p, &jsonrpc.Response{ID: m.ID, Result: json.RawMessage("{}")})
			return
		}
	case mcpmsg.MethodUnsubscribe:
		if !p.subs[sub.URI] || b.subs[sub.URI] > 1 {
			if p.subs[sub.URI] {
				delete(p.subs, sub.URI)
				b.subs[sub.URI]--
			}
			b.mu.Unlock()
			b.answer(p, &jsonrpc.Response{ID: m.ID, Result: json.RawMessage("{}")})
			return
		}
	case mcpmsg.MethodSetLevel:
		b.logLevel = m.Params
	}
	b.nextUp++
	c := &upCall{id: b.nextUp, peer: p, peerID: m.ID, method: m.Method, uri: sub.URI}
	params := m.Params
	if tok, ok := mcpmsg.ProgressToken(m); ok {
		c.origToken = tok
		c.token = mcpmsg.StringToken("bridge-" + strconv.FormatInt(c.id, 10))
		var err error
		if params, err = mcpmsg.SetMember(params, c.token.JSON(), "_meta", "progressToken"); err != nil {
			b.mu.Unlock()
			b.answer(p, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "params: %v", err))
			return
		}
		b.tokens[c.token] = c
	}
	b.calls[c.id] = c
	b.mu.Unlock()
	if err := ch.conn.Write(ctx, &jsonrpc.Request{ID: mcpmsg.IntID(c.id), Method: m.Method, Params: params}); err != nil {
		b.mu.Lock()
		b.dropCallLocked(c)
		b.mu.Unlock()
		b.answer(p, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "the MCP server could not be reached: %v", err))
	}
}

// peerNotified handles a notification from a peer.
func (b *Bridge) peerNotified(p *bridgePeer, m *jsonrpc.Request) {
	b.mu.Lock()
	ch := b.child
	switch m.Method {
	case mcpmsg.MethodCancelled:
		id, _, ok := mcpmsg.CancelledRequest(m.Params)
		var found *upCall
		for _, c := range b.calls {
			if ok && c.peer == p && c.peerID == id {
				found = c
				break
			}
		}
		if found == nil || ch == nil {
			b.mu.Unlock()
			return
		}
		b.dropCallLocked(found)
		b.mu.Unlock()
		params, err := mcpmsg.SetMember(m.Params, json.RawMessage(strconv.FormatInt(found.id, 10)), "requestId")
		if err == nil {
			ch.conn.Write(b.ctx, &jsonrpc.Request{Method: mcpmsg.MethodCancelled, Params: params})
		}
		return
	case mcpmsg.MethodProgress:
		// Progress on a request the server sent this peer (it asked for
		// progress on a sampling request, say): the token is the server's.
		b.mu.Unlock()
		if ch != nil {
			ch.conn.Write(b.ctx, m)
		}
		return
	}
	b.mu.Unlock()
	// notifications/initialized was answered for by the handshake;
	// roots/list_changed concerns roots the bridge does not offer.
}

// peerAnswered relays a peer's answer to a request of the server.
func (b *Bridge) peerAnswered(p *bridgePeer, m *jsonrpc.Response) {
	b.mu.Lock()
	d := b.downs[m.ID]
	ch := b.child
	ok := d != nil && d.peer == p && ch != nil && d.gen == ch.gen
	if ok {
		delete(b.downs, m.ID)
	}
	b.mu.Unlock()
	if ok {
		ch.conn.Write(b.ctx, m)
	}
}

// fromChild handles one message from the server.
func (b *Bridge) fromChild(ch *child, msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		id, _ := m.ID.Raw().(int64)
		b.mu.Lock()
		c := b.calls[id]
		if c == nil {
			b.mu.Unlock()
			return // cancelled, internal, or from before a restart
		}
		b.dropCallLocked(c)
		if c.peer != nil && m.Error == nil {
			switch c.method {
			case mcpmsg.MethodSubscribe:
				if !c.peer.subs[c.uri] {
					c.peer.subs[c.uri] = true
					b.subs[c.uri]++
				}
			case mcpmsg.MethodUnsubscribe:
				if c.peer.subs[c.uri] {
					delete(c.peer.subs, c.uri)
					if b.subs[c.uri]--; b.subs[c.uri] <= 0 {
						delete(b.subs, c.uri)
					}
				}
			}
		}
		b.mu.Unlock()
		if c.peer != nil {
			m.ID = c.peerID
			b.answer(c.peer, m)
		}
	case *jsonrpc.Request:
		if m.IsCall() {
			b.childAsks(ch, m)
			return
		}
		b.childNotifies(m)
	}
}

// childAsks routes a request of the server: ping is the bridge's to
// answer; sampling and elicitation go to the peer whose call caused them.
func (b *Bridge) childAsks(ch *child, m *jsonrpc.Request) {
	switch m.Method {
	case mcpmsg.MethodPing:
		ch.conn.Write(b.ctx, &jsonrpc.Response{ID: m.ID, Result: json.RawMessage("{}")})
		return
	case mcpmsg.MethodRootsList:
		ch.conn.Write(b.ctx, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "the bridge offers no roots"))
		return
	}
	c := b.causingCall(m.Method)
	if c == nil {
		ch.conn.Write(b.ctx, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound,
			"%s: no caller with a call in flight supports it", m.Method))
		return
	}
	b.mu.Lock()
	b.downs[m.ID] = &downCall{peer: c.peer, gen: ch.gen}
	b.mu.Unlock()
	if err := c.peer.conn.WriteRelated(b.ctx, &jsonrpc.Request{ID: m.ID, Method: m.Method, Params: m.Params}, c.peerID); err != nil {
		b.mu.Lock()
		delete(b.downs, m.ID)
		b.mu.Unlock()
		ch.conn.Write(b.ctx, mcpmsg.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "%s could not be sent to %s: %v", m.Method, c.peer.id, err))
	}
}

// causingCall guesses which relayed call a request of the server belongs
// to. Stdio carries no link between the two (the TypeScript SDK keeps
// relatedRequestId off the wire), so: the newest call in flight whose peer
// declared the capability the request needs. With one caller at a time
// (the usual case) the guess is exact.
func (b *Bridge) causingCall(method string) *upCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	var best *upCall
	for _, c := range b.calls {
		if c.peer == nil {
			continue
		}
		switch method {
		case "sampling/createMessage":
			if !c.peer.sampling {
				continue
			}
		case "elicitation/create":
			if !c.peer.elicitation {
				continue
			}
		}
		if best == nil || c.id > best.id {
			best = c
		}
	}
	return best
}

// childNotifies routes a notification of the server to the peers it
// concerns.
func (b *Bridge) childNotifies(m *jsonrpc.Request) {
	switch m.Method {
	case mcpmsg.MethodProgress:
		tok, _ := mcpmsg.ProgressToken(m)
		b.mu.Lock()
		c := b.tokens[tok]
		b.mu.Unlock()
		if c == nil {
			return
		}
		params, err := mcpmsg.SetMember(m.Params, c.origToken.JSON(), "progressToken")
		if err == nil {
			c.peer.conn.Write(b.ctx, &jsonrpc.Request{Method: m.Method, Params: params})
		}
	case mcpmsg.MethodCancelled:
		// The server gave up a request it sent a peer.
		id, _, ok := mcpmsg.CancelledRequest(m.Params)
		b.mu.Lock()
		d := b.downs[id]
		delete(b.downs, id)
		b.mu.Unlock()
		if ok && d != nil {
			d.peer.conn.Write(b.ctx, m)
		}
	case mcpmsg.MethodUpdated:
		var p struct {
			URI string `json:"uri"`
		}
		json.Unmarshal(m.Params, &p)
		b.toPeers(m, func(bp *bridgePeer) bool { return bp.subs[p.URI] })
	default:
		// list_changed, logging and anything else: every peer in session.
		b.toPeers(m, func(*bridgePeer) bool { return true })
	}
}

// toPeers sends a notification to the initialized peers that want it.
func (b *Bridge) toPeers(m *jsonrpc.Request, want func(*bridgePeer) bool) {
	b.mu.Lock()
	var to []*bridgePeer
	for _, p := range b.peers {
		if p.initialized && want(p) {
			to = append(to, p)
		}
	}
	b.mu.Unlock()
	for _, p := range to {
		p.conn.Write(b.ctx, m)
	}
}
