package participant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/roomtest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// events collects a client's events for a test to wait on.
type events struct {
	mu   sync.Mutex
	list []Event
	wake chan struct{}
}

func newEvents() *events { return &events{wake: make(chan struct{}, 1)} }

func (ev *events) add(e Event) {
	ev.mu.Lock()
	ev.list = append(ev.list, e)
	ev.mu.Unlock()
	select {
	case ev.wake <- struct{}{}:
	default:
	}
}

// wait returns the first event (after skipping n matched before) that
// matches pred.
func (ev *events) wait(t testing.TB, what string, pred func(Event) bool) Event {
	t.Helper()
	deadline := time.After(testwait.Timeout(patience))
	for {
		ev.mu.Lock()
		for _, e := range ev.list {
			if pred(e) {
				ev.mu.Unlock()
				return e
			}
		}
		ev.mu.Unlock()
		select {
		case <-ev.wake:
		case <-deadline:
			t.Fatalf("no %s event in %v", what, ev.snapshot())
		}
	}
}

func (ev *events) snapshot() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]Event(nil), ev.list...)
}

func (ev *events) chats() []string {
	var out []string
	for _, e := range ev.snapshot() {
		if e.Type == EventChat {
			out = append(out, e.Chat.From+":"+e.Chat.Text)
		}
	}
	return out
}

// testGateway is a room gateway for the client's tests.
type testGateway struct {
	*roomtest.Gateway
	t testing.TB
}

func startGateway(t testing.TB, opts room.Options) *testGateway {
	return &testGateway{Gateway: roomtest.Start(t, opts), t: t}
}

func (g *testGateway) token(topic, id string) string { return g.Token(topic, id) }
func (g *testGateway) restart()                      { g.Restart() }

// client connects id to topic; opts may be nil-valued.
func (g *testGateway) client(topic, id string, opts Options) (*Client, *events) {
	g.t.Helper()
	ev := newEvents()
	opts.Gateway, opts.Topic, opts.Token = g.URL, topic, g.token(topic, id)
	if opts.OnEvent == nil {
		opts.OnEvent = ev.add
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.ReconnectMin == 0 {
		opts.ReconnectMin = 20 * time.Millisecond
	}
	if opts.ReconnectMax == 0 {
		opts.ReconnectMax = 200 * time.Millisecond
	}
	c, err := Connect(testCtx(g.t), opts)
	if err != nil {
		g.t.Fatalf("connect %s: %v", id, err)
	}
	g.t.Cleanup(func() { c.Close() })
	return c, ev
}

// patience bounds each wait of these tests (an event, a call, a
// condition), scaled by testwait's knob: long, as it only bounds how long
// a failing test takes to say so.
const patience = 30 * time.Second

// testCtx is a context for a call that ends within patience.
func testCtx(t testing.TB) context.Context {
	ctx, _ := testwait.Context(t, patience)
	return ctx
}

// echoServer is a go-sdk server with an echo tool, a failing tool, a tool
// that reports progress, and one that never answers until cancelled.
func echoServer(t testing.TB, cancelled chan<- string) *mcp.Server {
	return echoServerWith(t, cancelled, nil)
}

func echoServerWith(t testing.TB, cancelled chan<- string, opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo-server", Version: "1.2.3"}, opts)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= 3; i++ {
			if tok != nil {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		if cancelled != nil {
			cancelled <- a.Text
		}
		return nil, nil, ctx.Err()
	})
	return s
}

func TestClient_ChatPresenceAndWelcome(t *testing.T) {
	g := startGateway(t, room.Options{})
	a, aev := g.client("room:x", "alice", Options{})
	b, bev := g.client("room:x", "bob", Options{})
	if a.Self().ID != "alice" || b.Self().ID != "bob" {
		t.Fatalf("self %v %v", a.Self(), b.Self())
	}
	aev.wait(t, "bob's join", func(e Event) bool { return e.Type == EventJoin && e.Participant.ID == "bob" })
	if ps := a.Participants(); len(ps) != 1 || ps[0].ID != "bob" {
		t.Fatalf("alice's roster %v", ps)
	}
	if c := bev.wait(t, "connected", func(e Event) bool { return e.Type == EventConnected }); len(c.Participants) != 1 || c.Participants[0].ID != "alice" {
		t.Fatalf("bob's welcome roster %v", c.Participants)
	}
	if _, err := a.Chat(testCtx(t), "hello <b>bob</b>"); err != nil {
		t.Fatal(err)
	}
	e := bev.wait(t, "chat", func(e Event) bool { return e.Type == EventChat })
	if e.Chat.From != "alice" || e.Chat.Text != "hello <b>bob</b>" || e.Chat.Format != "plain" || e.Chat.Mine || e.Chat.Seq == 0 {
		t.Fatalf("bob got %+v", e.Chat)
	}
	if !strings.Contains(string(e.Envelope.Payload), "<b>") {
		t.Fatalf("payload was HTML-escaped: %s", e.Envelope.Payload)
	}
	mine := aev.wait(t, "own chat echo", func(e Event) bool { return e.Type == EventChat })
	if !mine.Chat.Mine {
		t.Fatalf("alice's echo %+v", mine.Chat)
	}
	b.Close()
	l := aev.wait(t, "bob's leave", func(e Event) bool { return e.Type == EventLeave })
	if l.Participant.ID != "bob" || l.Reason != mcpx.LeaveClosed {
		t.Fatalf("leave %+v", l)
	}
}

func TestClient_RequestHandshakeOnceAndErrorCodes(t *testing.T) {
	g := startGateway(t, room.Options{})
	var inits atomic.Int32
	srv := echoServerWith(t, nil, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { inits.Add(1) },
	})
	g.client("room:x", "server", Options{Server: SDKServer(srv)})
	caller, _ := g.client("room:x", "caller", Options{})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := caller.Request(ctx, "server", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": fmt.Sprint(i)}})
			if err != nil || !strings.Contains(string(res), fmt.Sprintf("echo: %d", i)) {
				t.Errorf("call %d: %s %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	if n := inits.Load(); n != 1 {
		t.Fatalf("%d handshakes reached the server, want 1", n)
	}
	_, err := caller.Request(ctx, "server", "tools/call", map[string]any{"name": "nope"})
	werr, ok := wireError(err)
	if !ok || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("unknown tool: %v, want a -32602 JSON-RPC error", err)
	}
	_, err = caller.Request(ctx, "server", "no/such/method", nil)
	if werr, ok := wireError(err); !ok || werr.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("unknown method: %v, want -32601", err)
	}
	res, err := caller.Initialize(ctx, "server")
	if err != nil || res.ServerInfo.Name != "echo-server" || res.ServerInfo.Version != "1.2.3" {
		t.Fatalf("initialize result %+v %v", res, err)
	}
}

func TestClient_RequestToAbsentPeerFailsFast(t *testing.T) {
	g := startGateway(t, room.Options{})
	// A backoff far longer than the test: the second call must find it.
	caller, _ := g.client("room:x", "caller", Options{HandshakeRetryMin: time.Hour})
	_, err := caller.Request(testCtx(t), "ghost", "tools/list", nil)
	var gerr *GatewayError
	if !errors.As(err, &gerr) || gerr.Code != mcpx.CodeUnknownRecipient {
		t.Fatalf("err %v, want unknown_recipient", err)
	}
	// A second caller within the backoff does not hammer the peer.
	_, err = caller.Request(testCtx(t), "ghost", "tools/list", nil)
	if !errors.Is(err, ErrHandshakeBackoff) || !errors.As(err, &gerr) {
		t.Fatalf("second call: %v, want ErrHandshakeBackoff wrapping the gateway error", err)
	}
	// The peer's arrival clears the backoff.
	g.client("room:x", "ghost", Options{})
	testwait.Eventually(t, patience, "a handshake with ghost once it joined", func() bool {
		_, err := caller.Request(testCtx(t), "ghost", "ping", nil)
		if err != nil {
			return false
		}
		_, err = caller.Initialize(testCtx(t), "ghost")
		return err == nil
	})
}

func TestClient_TimeoutSendsCancelled(t *testing.T) {
	g := startGateway(t, room.Options{})
	cancelled := make(chan string, 1)
	g.client("room:x", "server", Options{Server: SDKServer(echoServer(t, cancelled))})
	caller, _ := g.client("room:x", "caller", Options{RequestTimeout: 1500 * time.Millisecond})
	_, err := caller.Request(testCtx(t), "server", "tools/call", map[string]any{"name": "hang", "arguments": map[string]any{"text": "t1"}})
	if !errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("err %v, want ErrRequestTimeout", err)
	}
	select {
	case got := <-cancelled:
		if got != "t1" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("the server's handler was never cancelled")
	}
	// The same through ctx.
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	caller2, _ := g.client("room:x", "caller2", Options{})
	_, err = caller2.Request(ctx, "server", "tools/call", map[string]any{"name": "hang", "arguments": map[string]any{"text": "t2"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	select {
	case got := <-cancelled:
		if got != "t2" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("ctx cancellation did not reach the server")
	}
}

func TestClient_PeerTransportSDKClient(t *testing.T) {
	g := startGateway(t, room.Options{})
	g.client("room:x", "server", Options{Server: SDKServer(echoServer(t, nil))})
	caller, _ := g.client("room:x", "caller", Options{})
	ctx := testCtx(t)
	var progress sync.Map
	newSession := func(name string) *mcp.ClientSession {
		cl := mcp.NewClient(&mcp.Implementation{Name: name}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				progress.Store(fmt.Sprint(name, r.Params.ProgressToken, r.Params.Progress), true)
			},
		})
		cs, err := cl.Connect(ctx, caller.PeerTransport("server"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	s1, s2 := newSession("one"), newSession("two")
	if s1.InitializeResult().ServerInfo.Name != "echo-server" || s2.InitializeResult().ServerInfo.Name != "echo-server" {
		t.Fatal("initialize results")
	}
	tools, err := s1.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools %v %v", tools, err)
	}
	// Both sessions use the same progress token; each sees its own.
	var wg sync.WaitGroup
	for _, s := range []*mcp.ClientSession{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"text": "x"}}
			p.SetProgressToken("tok")
			res, err := s.CallTool(ctx, p)
			if err != nil || res.IsError {
				t.Errorf("progress call: %v %v", res, err)
			}
		}()
	}
	wg.Wait()
	// The go-sdk runs notification handlers apart from delivering
	// responses, so the last progress may be handled after the result.
	for _, name := range []string{"one", "two"} {
		for i := 1; i <= 3; i++ {
			key := fmt.Sprint(name, "tok", float64(i))
			testwait.Eventually(t, patience, "session "+key, func() bool { _, ok := progress.Load(key); return ok })
		}
	}
	res, err := s2.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
		t.Fatalf("echo %v %v", res, err)
	}
	_ = json.Marshal
}
