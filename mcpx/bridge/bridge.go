package bridge

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmux"
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
	// Roots are not offered: a server asks for them outside of any call,
	// so no peer could be chosen to answer.
	ClientInfo      *mcp.Implementation
	Capabilities    *mcp.ClientCapabilities
	ProtocolVersion string // default mcpx.DefaultProtocolVersion
	// RestartMin and RestartMax bound the backoff between restarts of a
	// server that exited (defaults 250 ms and 30 s, doubling, with
	// jitter; a server that stayed up 10 s starts over at RestartMin).
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
// All of that is internal/mcpmux, shared with the ContextVM gateway.
type Bridge struct {
	mux    *mcpmux.Mux
	client *participant.Client
	log    *slog.Logger
}

// Start starts the server, performs the MCP handshake with it, then joins
// the topic. An error here (the command does not start, is not an MCP
// server, the gateway refuses the token) is returned; once running, the
// bridge restarts the server and reconnects to the gateway by itself.
func Start(ctx context.Context, opts Options) (*Bridge, error) {
	if opts.Command == nil {
		return nil, errors.New("mcpx bridge: Options.Command is required")
	}
	if opts.ClientInfo == nil {
		opts.ClientInfo = &mcp.Implementation{Name: "cvm-room-bridge", Version: "0"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	mux, err := mcpmux.Open(ctx, mcpmux.Options{
		Upstream: mcpmux.UpstreamFunc(func(ctx context.Context) (mcp.Connection, error) {
			return mcpmux.OpenCommand(ctx, opts.Command(), opts.Stderr)
		}),
		ClientInfo:        opts.ClientInfo,
		Capabilities:      opts.Capabilities,
		ProtocolVersion:   cmp.Or(opts.ProtocolVersion, mcpx.DefaultProtocolVersion),
		Routing:           mcpmux.RouteNewest,
		Name:              "the bridge",
		InitializeTimeout: opts.InitTimeout,
		RestartMin:        cmp.Or(opts.RestartMin, 250*time.Millisecond),
		RestartMax:        opts.RestartMax,
		Logger:            opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	b := &Bridge{mux: mux, log: opts.Logger}
	copts := opts.Participant
	copts.Server = b
	if copts.Logger == nil {
		copts.Logger = opts.Logger
	}
	if b.client, err = participant.Connect(ctx, copts); err != nil {
		mux.Close()
		return nil, err
	}
	return b, nil
}

// Client is the bridge's participant connection.
func (b *Bridge) Client() *participant.Client { return b.client }

// ServerInfo is the initialize result of the running server.
func (b *Bridge) ServerInfo() mcp.InitializeResult { return b.mux.Result() }

// Close leaves the topic and stops the server.
func (b *Bridge) Close() error {
	err := b.client.Close() // ends every peer's session first
	b.mux.Close()
	return err
}

// ServePeer implements participant.PeerServer: it relays one peer's
// session to the shared session with the server.
func (b *Bridge) ServePeer(ctx context.Context, conn *participant.PeerConn) error {
	sess := b.mux.Join(peerCaller{ctx: ctx, conn: conn})
	defer sess.Leave()
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return nil
		}
		sess.Handle(msg)
	}
}

// peerCaller is a peer as the mux reaches it. A request of the server's
// goes out correlated with the peer's call that caused it, so that the
// peer's client hands it to the session that made the call.
type peerCaller struct {
	ctx  context.Context
	conn *participant.PeerConn
}

func (p peerCaller) Send(msg jsonrpc.Message, related jsonrpc.ID) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && related.IsValid() {
		return p.conn.WriteRelated(p.ctx, req, related)
	}
	return p.conn.Write(p.ctx, msg)
}
