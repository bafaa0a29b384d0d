package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeConn is a client session as the contextvm server hands it to the
// gateway, fed and read by a test: no relay, no signatures, so that a
// test can flood the gateway with hundreds of sessions in no time.
type fakeConn struct {
	client nostr.PubKey
	in     chan jsonrpc.Message
	out    chan jsonrpc.Message
	closed chan struct{}
	once   sync.Once
}

func newFakeConn(client nostr.PubKey) *fakeConn {
	return &fakeConn{client: client, in: make(chan jsonrpc.Message, 4), out: make(chan jsonrpc.Message, 16), closed: make(chan struct{})}
}

func (c *fakeConn) Client() nostr.PubKey { return c.client }
func (c *fakeConn) SessionID() string    { return "" }

func (c *fakeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.closed:
		return nil, mcp.ErrConnectionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *fakeConn) Write(ctx context.Context, m jsonrpc.Message) error {
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	select {
	case c.out <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// ask sends a request and returns the response to it.
func (c *fakeConn) ask(t *testing.T, id int64, method string, params any) *jsonrpc.Response {
	t.Helper()
	raw, _ := json.Marshal(params)
	c.in <- &jsonrpc.Request{ID: mcpmsg.IntID(id), Method: method, Params: raw}
	select {
	case m := <-c.out:
		resp, ok := m.(*jsonrpc.Response)
		if !ok {
			t.Fatalf("%s: got %T, want its response", method, m)
		}
		return resp
	case <-time.After(testwait.Timeout(30 * time.Second)):
		t.Fatalf("%s: no response", method)
		return nil
	}
}

var initializeParams = &mcp.InitializeParams{ProtocolVersion: contextvm.ProtocolVersion, Capabilities: &mcp.ClientCapabilities{},
	ClientInfo: &mcp.Implementation{Name: "fake", Version: "1"}}

// echoServer is an upstream with one tool.
func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	return s
}

// newReserveGateway is a per-client gateway with an allow-list of friend,
// whose client sessions a test hands it itself.
func newReserveGateway(t *testing.T, friend nostr.PubKey, opts Options) *Gateway {
	t.Helper()
	opts.Upstream = InProcess(echoServer())
	opts.NoNostr = true
	opts.Server.AllowedClients = []nostr.PubKey{friend}
	g, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// strangersHeld is how many upstream sessions clients outside the
// allow-list hold.
func (g *Gateway) strangersHeld() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.heldLocked().Unknown
}

// A hundred throwaway keys flooding an allow-listed gateway over and over
// hold at most its sessions less the reserve, and its allowed client's
// initialize and call go through at the first try, every time. Each round
// floods again at once: with a grace far longer than the test, every
// stranger's session is always young, which is the most a flood every
// 30 s can achieve against the default grace.
func TestPerClient_StrangersNeverTakeTheReserve(t *testing.T) {
	const (
		maxSessions = 64
		reserve     = 4
		strangers   = 100
		rounds      = 20
	)
	friend := nostr.Generate().Public()
	g := newReserveGateway(t, friend, Options{MaxSessions: maxSessions, SessionReserve: reserve, SessionGrace: time.Hour})
	keys := make([]nostr.PubKey, strangers)
	for i := range keys {
		keys[i] = nostr.Generate().Public()
	}
	sessions := make(map[nostr.PubKey]*fakeConn)
	// open starts a client's new session, retiring its last one as the
	// contextvm server does when a client initializes again.
	open := func(client nostr.PubKey) *fakeConn {
		if old := sessions[client]; old != nil {
			old.Close()
		}
		c := newFakeConn(client)
		sessions[client] = c
		if !g.serveConn(c) {
			t.Fatal("the gateway is closed")
		}
		return c
	}
	for round := 1; round <= rounds; round++ {
		flood := make([]*fakeConn, strangers)
		for i, k := range keys {
			flood[i] = open(k)
			raw, _ := json.Marshal(initializeParams)
			flood[i].in <- &jsonrpc.Request{ID: mcpmsg.IntID(int64(round)), Method: "initialize", Params: raw}
		}
		admitted := 0
		for _, c := range flood {
			select {
			case m := <-c.out:
				if resp, ok := m.(*jsonrpc.Response); ok && resp.Error == nil {
					admitted++
				}
			case <-time.After(testwait.Timeout(30 * time.Second)):
				t.Fatalf("round %d: a stranger's initialize was never answered", round)
			}
		}
		if held := g.strangersHeld(); held > maxSessions-reserve || round == 1 && admitted != maxSessions-reserve {
			t.Fatalf("round %d: strangers were admitted %d times and hold %d sessions; want at most %d", round, admitted, held, maxSessions-reserve)
		}
		c := open(friend)
		if resp := c.ask(t, 1, "initialize", initializeParams); resp.Error != nil {
			t.Fatalf("round %d: the allowed client's initialize: %v", round, resp.Error)
		}
		c.in <- &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}
		resp := c.ask(t, 2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": fmt.Sprint(round)}})
		if resp.Error != nil || !json.Valid(resp.Result) {
			t.Fatalf("round %d: the allowed client's call: %v", round, resp.Error)
		}
	}
}

// An allowed client's upstream session starts even while strangers' fill
// every place in the line of sessions starting: it has a line of its own.
func TestPerClient_AllowedClientStartsBesideAQueueOfStrangers(t *testing.T) {
	friend := nostr.Generate().Public()
	g := newReserveGateway(t, friend, Options{})
	// Strangers' upstream sessions starting, as many as may at once, and
	// not done yet.
	for range cap(g.starts) {
		g.starts <- struct{}{}
	}
	t.Cleanup(func() {
		for range cap(g.starts) {
			<-g.starts
		}
	})
	c := newFakeConn(friend)
	if !g.serveConn(c) {
		t.Fatal("the gateway is closed")
	}
	if resp := c.ask(t, 1, "initialize", initializeParams); resp.Error != nil {
		t.Fatalf("the allowed client's initialize: %v", resp.Error)
	}
}
