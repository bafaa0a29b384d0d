//lint:file-ignore SA1019 the test server asks for sampling, deprecated (SEP-2577) but still relayed
package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/roomtest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// The bridge tests run this test binary as the bridge's stdio MCP server:
// fast, deterministic, and able to count what reached it.
func TestMain(m *testing.M) {
	if os.Getenv("MCPX_TEST_CHILD") == "1" {
		runTestChild()
		return
	}
	goleak.VerifyTestMain(m)
}

func runTestChild() {
	var subs, unsubs, cancelled atomic.Int32
	s := mcp.NewServer(&mcp.Implementation{Name: "test-child", Version: "9.9.9"}, &mcp.ServerOptions{
		Instructions:       "child instructions",
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { subs.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { unsubs.Add(1); return nil },
	})
	type in struct {
		Text string `json:"text,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 3; i++ {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: a.Text})
			// Pacing: the calls of two peers with the same progress
			// token stay in flight together, the case under test.
			time.Sleep(5 * time.Millisecond)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		cancelled.Add(1)
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "stats"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		text := fmt.Sprintf("subs=%d unsubs=%d cancelled=%d", subs.Load(), unsubs.Load(), cancelled.Load())
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Text}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: a.Text, RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(res.Action, " ", res.Content["name"])}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "pid"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "r"}}}, nil
	})
	s.Run(context.Background(), exitOnShutdown{&mcp.StdioTransport{}})
}

// exitOnShutdown makes the test child a server that takes seed 002's
// shutdown at its word and exits, so that a test sees whether one reached
// it.
type exitOnShutdown struct{ mcp.Transport }

func (t exitOnShutdown) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return shutdownConn{c}, err
}

type shutdownConn struct{ mcp.Connection }

func (c shutdownConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "shutdown" {
		os.Exit(0)
	}
	return m, err
}

// testGateway is a room gateway for the bridge's tests.
type testGateway struct {
	*roomtest.Gateway
	t testing.TB
}

func startGateway(t testing.TB, opts room.Options) *testGateway {
	return &testGateway{Gateway: roomtest.Start(t, opts), t: t}
}

// client joins topic as id.
func (g *testGateway) client(topic, id string, opts participant.Options) (*participant.Client, struct{}) {
	g.t.Helper()
	opts.Gateway, opts.Topic, opts.Token = g.URL, topic, g.Token(topic, id)
	opts.ReconnectMin, opts.ReconnectMax = 20*time.Millisecond, 200*time.Millisecond
	c, err := participant.Connect(testCtx(g.t), opts)
	if err != nil {
		g.t.Fatalf("connect %s: %v", id, err)
	}
	g.t.Cleanup(func() { c.Close() })
	return c, struct{}{}
}

// patience bounds each wait of these tests (a call, a condition), scaled
// by testwait's knob: long, as it only bounds how long a failing test
// takes to say so.
const patience = 30 * time.Second

// testCtx is a context for a call that ends within patience.
func testCtx(t testing.TB) context.Context {
	ctx, _ := testwait.Context(t, patience)
	return ctx
}

func (g *testGateway) bridge(topic, id string) *Bridge {
	return g.bridgeWith(topic, id, Options{})
}

func (g *testGateway) bridgeWith(topic, id string, opts Options) *Bridge {
	g.t.Helper()
	ctx, cancel := testwait.Context(g.t, patience)
	defer cancel()
	opts.Participant = participant.Options{Gateway: g.URL, Topic: topic, Token: g.Token(topic, id),
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}
	opts.Command, opts.Stderr = childCommand, os.Stderr
	b, err := Start(ctx, opts)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { b.Close() })
	return b
}

func stats(t *testing.T, c *participant.Client) string {
	t.Helper()
	res, err := c.Request(testCtx(t), "child", "tools/call", map[string]any{"name": "stats", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var r mcp.CallToolResult
	json.Unmarshal(res, &r)
	return r.Content[0].(*mcp.TextContent).Text
}

func TestBridge_RefusesRequestsBeforeInitialize(t *testing.T) {
	g := startGateway(t, room.Options{})
	g.bridge("room:x", "child")
	c, _ := g.client("room:x", "raw", participant.Options{})
	_, err := c.Call(testCtx(t), "child", "tools/list", json.RawMessage("{}"))
	if werr, ok := asWireError(err); !ok || werr.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(werr.Message, "initialize first") {
		t.Fatalf("err %v, want -32600 asking for initialize", err)
	}
	if _, err := c.Call(testCtx(t), "child", "ping", nil); err != nil {
		t.Fatalf("ping before initialize: %v", err)
	}
	res, err := c.Initialize(testCtx(t), "child")
	if err != nil || res.ServerInfo.Name != "test-child" || res.Instructions != "child instructions" {
		t.Fatalf("initialize: %+v %v: want the child's own result", res, err)
	}
}

// Two peers whose sessions use the same JSON-RPC ids and the same progress
// token each get their own answers and their own progress.
func TestBridge_IDsAndProgressTokensArePerPeer(t *testing.T) {
	g := startGateway(t, room.Options{})
	b := g.bridge("room:x", "child")
	type got struct {
		mu       sync.Mutex
		progress []string
	}
	var wg sync.WaitGroup
	for _, id := range []string{"p1", "p2"} {
		c, _ := g.client("room:x", id, participant.Options{})
		var mine got
		cl := mcp.NewClient(&mcp.Implementation{Name: id}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mine.mu.Lock()
				mine.progress = append(mine.progress, fmt.Sprint(r.Params.ProgressToken, "/", r.Params.Message))
				mine.mu.Unlock()
			},
		})
		cs, err := cl.Connect(testCtx(t), c.PeerTransport("child"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"text": id}}
				p.SetProgressToken("same")
				res, err := cs.CallTool(testCtx(t), p)
				if err != nil || res.Content[0].(*mcp.TextContent).Text != "done "+id {
					t.Errorf("%s: %v %v", id, res, err)
				}
			}
			testwait.Eventually(t, patience, id+"'s progress", func() bool {
				mine.mu.Lock()
				defer mine.mu.Unlock()
				return len(mine.progress) == 15
			})
			for _, p := range mine.progress {
				if p != "same/"+id {
					t.Errorf("%s got progress %s", id, p)
				}
			}
		}()
	}
	wg.Wait()
	if left := b.mux.InFlight(); left != 0 {
		t.Fatalf("%d calls or tokens left behind", left)
	}
}

// One upstream session serves every peer: the server sees a URI subscribed
// once and unsubscribed when the last subscriber is gone.
func TestBridge_SubscriptionsAreCountedAcrossPeers(t *testing.T) {
	g := startGateway(t, room.Options{})
	g.bridge("room:x", "child")
	a, _ := g.client("room:x", "a", participant.Options{})
	bb, _ := g.client("room:x", "b", participant.Options{})
	sub := func(c *participant.Client, method string) {
		if _, err := c.Request(testCtx(t), "child", method, map[string]string{"uri": "test://r"}); err != nil {
			t.Fatal(err)
		}
	}
	sub(a, "resources/subscribe")
	sub(bb, "resources/subscribe")
	sub(a, "resources/subscribe") // again: nothing changes
	if s := stats(t, a); s != "subs=1 unsubs=0 cancelled=0" {
		t.Fatalf("after two subscribers: %s", s)
	}
	sub(a, "resources/unsubscribe")
	if s := stats(t, a); s != "subs=1 unsubs=0 cancelled=0" {
		t.Fatalf("with one subscriber left: %s", s)
	}
	bb.Close() // the last subscriber leaves
	testwait.Eventually(t, patience, "the unsubscribe upstream", func() bool { return stats(t, a) == "subs=1 unsubs=1 cancelled=0" })
}

// A peer that leaves has its calls cancelled upstream.
func TestBridge_PeerLeavingCancelsItsCalls(t *testing.T) {
	g := startGateway(t, room.Options{})
	b := g.bridge("room:x", "child")
	watcher, _ := g.client("room:x", "watcher", participant.Options{})
	caller, _ := g.client("room:x", "caller", participant.Options{})
	go caller.Request(context.Background(), "child", "tools/call", map[string]any{"name": "hang", "arguments": map[string]any{}})
	testwait.Eventually(t, patience, "the call at the server", func() bool { return b.mux.InFlight() > 0 })
	caller.Close()
	testwait.Eventually(t, patience, "the cancellation upstream", func() bool { return stats(t, watcher) == "subs=0 unsubs=0 cancelled=1" })
}

// The server's sampling and elicitation requests go to the peer whose
// call caused them, and the answer comes back into the tool's result.
func TestBridge_ServerRequestsGoToTheCaller(t *testing.T) {
	for _, tc := range []struct {
		tool, text string
		// options are participant id's: the caller answers the server's
		// request, anyone else refuses it, with refuse, which counts.
		options func(id string, refuse func() error) *mcp.ClientOptions
		want    string
	}{
		{"sample", "q", func(id string, refuse func() error) *mcp.ClientOptions {
			return &mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				if id != "caller" {
					return nil, refuse()
				}
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "answered by " + id}}, nil
			}}
		}, "answered by caller"},
		{"elicit", "who?", func(id string, refuse func() error) *mcp.ClientOptions {
			return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if id != "caller" {
					return nil, refuse()
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "answered by " + id + " to " + r.Params.Message}}, nil
			}}
		}, "accept answered by caller to who?"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			g := startGateway(t, room.Options{})
			g.bridge("room:x", "child")
			var asked atomic.Int32
			refuse := func() error { asked.Add(1); return errors.New("not me") }
			for _, id := range []string{"bystander", "caller"} {
				c, _ := g.client("room:x", id, participant.Options{})
				cl := mcp.NewClient(&mcp.Implementation{Name: id}, tc.options(id, refuse))
				cs, err := cl.Connect(testCtx(t), c.PeerTransport("child"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if id != "caller" {
					continue
				}
				res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"text": tc.text}})
				if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != tc.want {
					t.Fatalf("%s: %+v %v", tc.tool, res, err)
				}
			}
			if asked.Load() != 0 {
				t.Fatal("the bystander was asked")
			}
		})
	}
}

func asWireError(err error) (*jsonrpc.Error, bool) {
	var werr *jsonrpc.Error
	ok := errors.As(err, &werr)
	return werr, ok
}

// Seed 002's shutdown from one peer is answered by the bridge: the server
// that serves every peer never sees it (the test child would exit).
func TestBridge_ShutdownDoesNotStopTheServer(t *testing.T) {
	g := startGateway(t, room.Options{})
	g.bridge("room:x", "child")
	pid := func(c *participant.Client) string {
		t.Helper()
		res, err := c.Request(testCtx(t), "child", "tools/call", map[string]any{"name": "pid", "arguments": map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		var r mcp.CallToolResult
		json.Unmarshal(res, &r)
		return r.Content[0].(*mcp.TextContent).Text
	}
	quitter, _ := g.client("room:x", "quitter", participant.Options{})
	other, _ := g.client("room:x", "other", participant.Options{})
	before := pid(other)
	res, err := quitter.Request(testCtx(t), "child", "shutdown", nil)
	if err != nil || string(res) != "{}" {
		t.Fatalf("shutdown: %s %v; want {}", res, err)
	}
	if after := pid(other); after != before {
		t.Fatalf("the server was restarted (pid %s, then %s): the shutdown reached it", before, after)
	}
	if after := pid(quitter); after != before {
		t.Fatalf("pid %s for the quitter, %s before", after, before)
	}
}

// With AnnounceTools the bridge broadcasts its server's tools when it
// joins, and again when it rejoins after a reconnect.
func TestBridge_AnnouncesToolsOnJoin(t *testing.T) {
	g := startGateway(t, room.Options{})
	seen := make(chan participant.Event, 16)
	g.client("room:x", "watcher", participant.Options{OnEvent: func(e participant.Event) {
		if e.Type == participant.EventNotification && e.Method == methodToolsAvailable {
			seen <- e
		}
	}})
	g.bridgeWith("room:x", "child", Options{AnnounceTools: true})
	check := func(e participant.Event) {
		t.Helper()
		var p struct {
			Params struct {
				Tools       []announcedTool `json:"tools"`
				Participant struct {
					ID string `json:"id"`
				} `json:"participant"`
			} `json:"params"`
		}
		if err := json.Unmarshal(e.Envelope.Payload, &p); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range p.Params.Tools {
			names = append(names, tool.Name)
		}
		if e.Envelope.From != "child" || !e.Envelope.Broadcast() || p.Params.Participant.ID != "child" ||
			!strings.Contains(strings.Join(names, ","), "elicit") || len(names) != 6 {
			t.Fatalf("announcement %s from %s to %v", e.Envelope.Payload, e.Envelope.From, e.Envelope.To)
		}
	}
	wait := func(what string) participant.Event {
		t.Helper()
		select {
		case e := <-seen:
			return e
		case <-time.After(testwait.Timeout(patience)):
			t.Fatalf("no %s", what)
		}
		return participant.Event{}
	}
	check(wait("announcement on join"))
	g.Restart() // everyone rejoins; the watcher may be back after the bridge, and then reads it from history
	check(wait("announcement on rejoin"))
}
