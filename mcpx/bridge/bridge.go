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
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
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
	// AnnounceTools broadcasts the server's tools to the topic each time
	// the bridge joins it, reconnects included (seed 001 §6: participants
	// MAY advertise their tools on join), as a notifications/tools/available
	// carrying each tool's name, title and description and the bridge's
	// participant (the reference bridge's shape). Peers still list the
	// tools to call them.
	AnnounceTools bool
	Logger        *slog.Logger
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

	// announce is kicked on every welcome when Options.AnnounceTools is
	// set; the announcer goroutine, which Close ends, answers it.
	announce chan struct{}
	stop     context.CancelFunc
	done     chan struct{}
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
	b := &Bridge{mux: mux, log: opts.Logger, announce: make(chan struct{}, 1), done: make(chan struct{})}
	copts := opts.Participant
	copts.Server = b
	if copts.Logger == nil {
		copts.Logger = opts.Logger
	}
	if opts.AnnounceTools {
		// The first welcome comes before Connect returns, so the kick
		// waits in the channel for the announcer, which needs the client.
		onEvent := copts.OnEvent
		copts.OnEvent = func(e participant.Event) {
			if e.Type == participant.EventConnected {
				select {
				case b.announce <- struct{}{}:
				default: // one is pending already
				}
			}
			if onEvent != nil {
				onEvent(e)
			}
		}
	}
	if b.client, err = participant.Connect(ctx, copts); err != nil {
		mux.Close()
		return nil, err
	}
	actx, stop := context.WithCancel(context.Background())
	b.stop = stop
	go func() {
		defer close(b.done)
		b.announcer(actx)
	}()
	return b, nil
}

// methodToolsAvailable is the reference bridge's advertisement of its
// tools; seed 001 §6 names no method.
const methodToolsAvailable = "notifications/tools/available"

// announceTimeout bounds one advertisement: listing the tools and sending.
const announceTimeout = 30 * time.Second

// announcer broadcasts the server's tools after each welcome until ctx
// ends.
func (b *Bridge) announcer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.announce:
		}
		actx, cancel := context.WithTimeout(ctx, announceTimeout)
		err := b.announceTools(actx)
		cancel()
		if err != nil && ctx.Err() == nil {
			b.log.Warn("tools not announced", "err", err)
		}
	}
}

// announcedTool is what an advertisement says of a tool.
type announcedTool struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

func (b *Bridge) announceTools(ctx context.Context) error {
	tools, err := b.listTools(ctx)
	if err != nil {
		return err
	}
	list := make([]announcedTool, 0, len(tools))
	for _, t := range tools {
		list = append(list, announcedTool{Name: t.Name, Title: t.Title, Description: t.Description})
	}
	self := b.client.Self()
	if _, err := b.client.Notify(ctx, nil, methodToolsAvailable, map[string]any{"tools": list, "participant": self}); err != nil {
		return fmt.Errorf("mcpx bridge: announcing tools: %w", err)
	}
	b.log.Debug("tools announced", "tools", len(list))
	return nil
}

// maxToolPages bounds the pages of tools/list one advertisement reads, so
// that a server whose cursors never end cannot keep the announcer busy.
const maxToolPages = 100

// listTools lists the server's tools through a session of the bridge's
// own with the mux, as any peer would.
func (b *Bridge) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	answers := make(chan *jsonrpc.Response, 1)
	sess := b.mux.Join(mcpmux.CallerFunc(func(msg jsonrpc.Message, _ jsonrpc.ID) error {
		if r, ok := msg.(*jsonrpc.Response); ok {
			select {
			case answers <- r:
			default: // one request at a time: never more than one answer
			}
			return nil
		}
		// The server's notifications and requests are for peers.
		return errors.New("the bridge's own session takes no requests")
	}))
	defer sess.Leave()
	call := func(id int64, method string, params any) (json.RawMessage, error) {
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		sess.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(id), Method: method, Params: raw})
		select {
		case r := <-answers:
			if r.Error != nil {
				return nil, fmt.Errorf("mcpx bridge: %s: %w", method, r.Error)
			}
			return r.Result, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("mcpx bridge: %s: %w", method, ctx.Err())
		}
	}
	if _, err := call(0, mcpmsg.MethodInitialize, map[string]any{
		"protocolVersion": mcpx.DefaultProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "cvm-room-bridge", "version": "0"},
	}); err != nil {
		return nil, err
	}
	var tools []*mcp.Tool
	cursor := ""
	for page := range maxToolPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := call(int64(page+1), "tools/list", params)
		if err != nil {
			return nil, err
		}
		var res mcp.ListToolsResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("mcpx bridge: tools/list: %w", err)
		}
		tools = append(tools, res.Tools...)
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	return tools, nil
}

// Client is the bridge's participant connection.
func (b *Bridge) Client() *participant.Client { return b.client }

// ServerInfo is the initialize result of the running server.
func (b *Bridge) ServerInfo() mcp.InitializeResult { return b.mux.Result() }

// Close leaves the topic and stops the server.
func (b *Bridge) Close() error {
	b.stop()
	<-b.done
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
