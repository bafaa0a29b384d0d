//lint:file-ignore SA1019 the test clients answer sampling and roots, deprecated (SEP-2577) but still relayed
package gateway_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestPerClient_InitializeResultPassesThrough(t *testing.T) {
	b := newBench(t, gateway.Options{})
	cs := b.connect(nil)
	res := cs.InitializeResult()
	if res.ServerInfo.Name != "gateway-test-upstream" || res.ServerInfo.Version != "0.1.0" {
		t.Errorf("serverInfo %+v", res.ServerInfo)
	}
	if res.Instructions != testInstructions {
		t.Errorf("instructions %q", res.Instructions)
	}
	if res.Capabilities.Resources == nil || !res.Capabilities.Resources.Subscribe || res.Capabilities.Tools == nil {
		t.Errorf("capabilities %+v", res.Capabilities)
	}
	if res.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol %q", res.ProtocolVersion)
	}
}

func TestPerClient_EachClientSessionHasItsOwnUpstream(t *testing.T) {
	b := newBench(t, gateway.Options{})
	a, c := b.connect(nil), b.connect(nil)
	pidA, pidC := call(t, a, "pid", nil), call(t, c, "pid", nil)
	if pidA == pidC {
		t.Fatalf("two clients share upstream process %s", pidA)
	}
	if again := call(t, a, "pid", nil); again != pidA {
		t.Fatalf("one client reached two upstreams: %s then %s", pidA, again)
	}
	if n := b.metric("cvm_gateway_upstream_sessions"); n != 2 {
		t.Errorf("upstream sessions %v, want 2", n)
	}
	if n := b.metric("cvm_gateway_sessions"); n != 2 {
		t.Errorf("sessions %v, want 2", n)
	}
}

func TestPerClient_MessagesSentBeforeInitializeAnswerAreDelivered(t *testing.T) {
	b := newBench(t, gateway.Options{Upstream: child("early")})
	changed := make(chan struct{}, 1)
	logged := make(chan string, 1)
	b.connect(&mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			logged <- req.Params.Data.(string)
		},
	})
	within(t, changed, "tools/list_changed sent before the initialize answer")
	if msg := within(t, logged, "log message sent before the initialize answer"); msg != "early bird" {
		t.Errorf("log %q", msg)
	}
}

func TestPerClient_ServerToClientRequestsRoundTrip(t *testing.T) {
	b := newBench(t, gateway.Options{})
	client := newClient(&mcp.ClientOptions{
		CreateMessageHandler: sampler,
		Capabilities:         &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}},
	})
	client.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	cs, err := b.tryConnectClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, cs, "sample", map[string]any{"text": "hello"}); got != "sampled: hello" {
		t.Errorf("sample: %q", got)
	}
	if got := call(t, cs, "roots", nil); !strings.Contains(got, "file:///work") {
		t.Errorf("roots: %q", got)
	}
}

// sampler is a client's model: it answers "sampled: PROMPT".
func sampler(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	prompt := req.Params.Messages[0].Content.(*mcp.TextContent).Text
	return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "sampled: " + prompt}}, nil
}

func TestPerClient_ProgressSubscriptionsAndListChanged(t *testing.T) {
	b := newBench(t, gateway.Options{})
	var mu sync.Mutex
	var progress []float64
	updated := make(chan string, 4)
	changed := make(chan struct{}, 4)
	cs := b.connect(&mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 30, "steps": 3}}
	params.SetProgressToken("p")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, patience, "three progress notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(progress) == 3 })

	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "touch", map[string]any{"uri": "test://a"})
	if uri := within(t, updated, "resource update"); uri != "test://a" {
		t.Errorf("updated %q", uri)
	}
	call(t, cs, "add_tool", nil)
	within(t, changed, "tools/list_changed")
}

func TestPerClient_SessionBound(t *testing.T) {
	// Isolated, the session started for an evicted client's next request
	// (a stateless one) needs an upstream slot too.
	b := newBench(t, gateway.Options{MaxSessions: 2, SessionGrace: 200 * time.Millisecond, IsolateStateless: true})
	first, second := b.connect(nil), b.connect(nil)
	firstPID := call(t, first, "pid", nil)
	call(t, second, "pid", nil)

	// A third client takes the place of the least recently active session
	// once that has been quiet for the grace period; until then it is told
	// to retry, and its transport does.
	third := b.connect(nil)
	call(t, third, "pid", nil)
	if n := b.metric("cvm_gateway_sessions_evicted_total"); n != 1 {
		t.Fatalf("evicted %v, want 1", n)
	}
	testwait.Eventually(t, patience, "two upstream sessions", func() bool { return b.metric("cvm_gateway_upstream_sessions") == 2 })
	// The evicted client's next request starts a new session (initialized
	// on its behalf by the contextvm server), on a new upstream: refused
	// as busy while the other two are young, then let in.
	if pid := call(t, first, "pid", nil); pid == firstPID {
		t.Errorf("evicted client still on upstream %s", pid)
	}
	if n := b.metric("cvm_gateway_sessions_evicted_total"); n != 2 {
		t.Fatalf("evicted %v, want 2", n)
	}

	// With every session busy, a newcomer is refused, not queued, with
	// busy's code and when to retry.
	b2 := newBench(t, gateway.Options{MaxSessions: 1})
	busy := b2.connectInFlight(nil)
	done := busy.slow(t, 1500)
	_, err := b2.tryConnect(nil)
	if err == nil || !strings.Contains(err.Error(), "gateway busy") {
		t.Fatalf("connect beyond the bound with every session busy: %v; want a busy refusal", err)
	}
	// Busy has a code of its own, not unauthorized's -32000: retry later.
	if code := rpcError(t, err).Code; code != contextvm.CodeServerBusy || code == contextvm.CodeUnauthorized {
		t.Errorf("busy refusal code %d, want %d", code, contextvm.CodeServerBusy)
	}
	if wait, ok := contextvm.RetryAfter(err); !ok || wait < time.Second {
		t.Errorf("busy refusal without a retry_after: %v", err)
	}
	if err := within(t, done, "slow call"); err != nil {
		t.Fatal(err)
	}
	if n := metricOf(t, b2.gw, "cvm_gateway_sessions_refused_total"); n < 1 {
		t.Errorf("refused %v", n)
	}
}

// A session the gateway refuses for a client without one (stateless, or
// evicted; isolated, it needs an upstream slot) answers the client's
// request with the refusal: busy, with when to retry, not a bare "session
// closed".
func TestPerClient_StatelessRefusalSaysBusy(t *testing.T) {
	b := newBench(t, gateway.Options{MaxSessions: 1, IsolateStateless: true})
	b.connect(nil) // young for 30 s: nobody else gets in
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	cs, err := contextvm.Connect(ctx, newClient(nil), contextvm.ClientOptions{
		Server: b.srv.PublicKey().Hex(), Relays: []string{b.relay}, Stateless: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = tryCall(cs, "pid", nil)
	if wait, ok := contextvm.RetryAfter(err); !ok || wait < 20*time.Second {
		t.Fatalf("a stateless call beyond the bound: %v; want busy with the young session's wait", err)
	}
}

func TestPerClient_IdleSessionsAreReaped(t *testing.T) {
	b := newBench(t, gateway.Options{IdleTimeout: 300 * time.Millisecond})
	cs := b.connect(nil)
	pid := call(t, cs, "pid", nil)
	// The session that answered is reaped with its upstream: the process
	// goes away. (Waiting for the log line instead could see the reaping
	// of a session that went idle before the call.)
	n, _ := strconv.Atoi(pid)
	testwait.Eventually(t, patience, "the idle session's upstream to exit", func() bool { return syscall.Kill(n, 0) != nil })
	if n := b.metric("cvm_gateway_sessions_reaped_total"); n < 1 {
		t.Fatalf("reaped %v sessions", n)
	}
	// The client carries on: its next request opens a new session.
	if again := call(t, cs, "pid", nil); again == pid {
		t.Errorf("reaped session's upstream %s still answering", pid)
	}
}

// A session whose call outlasts IdleTimeout is busy until the answer has
// reached its client, not only until the upstream answered: reaped in
// between, the client would get "session closed" instead of its result.
func TestBusySessionIsNotReaped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      gateway.Options
		stateless bool
	}{
		{"per-client", gateway.Options{}, false},
		{"per-client stateless", gateway.Options{}, true},
		{"shared", gateway.Options{Mode: gateway.Shared}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.IdleTimeout = 100 * time.Millisecond
			b := newBench(t, tc.opts)
			connect := func() *mcp.ClientSession { return b.connect(nil) }
			if tc.stateless {
				connect = b.connectStateless
			}
			// In flight for several idle periods: must survive them.
			for i := range 3 {
				if got, err := tryCall(connect(), "slow", map[string]any{"ms": 500}); err != nil || got != "done" {
					t.Fatalf("call %d: %q, %v", i, got, err)
				}
			}
		})
	}
}

func TestPerClient_ChildCrash(t *testing.T) {
	b := newBench(t, gateway.Options{})
	updated := make(chan string, 4)
	f := b.connectInFlight(&mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	cs := f.cs
	pid := call(t, cs, "pid", nil)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}

	slow := f.slow(t, 10000)
	start := time.Now()
	_, err := tryCall(cs, "crash", map[string]any{"code": 3})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "crashing on request") {
		t.Fatalf("crash call: %v; want an error with the exit status and the child's last words", err)
	}
	if err := within(t, slow, "answer to the call in flight"); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("call in flight: %v; want an error saying the upstream exited", err)
	}
	if time.Since(start) > testwait.Timeout(5*time.Second) {
		t.Fatal("in-flight callers waited for a timeout")
	}

	// Restarted with backoff, initialized again, subscriptions replayed.
	var again string
	testwait.Eventually(t, patience, "the upstream to be restarted", func() bool {
		again, err = tryCall(cs, "pid", nil)
		return err == nil
	})
	if again == pid {
		t.Fatalf("same pid %s after a crash", pid)
	}
	if n := b.metric("cvm_gateway_upstream_restarts_total"); n != 1 {
		t.Errorf("restarts %v, want 1", n)
	}
	call(t, cs, "touch", map[string]any{"uri": "test://a"})
	if uri := within(t, updated, "resource update after the restart"); uri != "test://a" {
		t.Errorf("updated %q", uri)
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	res, err := gateway.Check(ctx, child("server"), 0)
	if err != nil || res.ServerInfo.Name != "gateway-test-upstream" {
		t.Fatalf("working upstream: %+v %v", res, err)
	}
	_, err = gateway.Check(ctx, child("exit"), 0)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom: missing configuration") {
		t.Fatalf("upstream that exits at once: %v", err)
	}
	missing := &gateway.Command{Path: "cvm-no-such-command"}
	if err := missing.LookPath(); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("LookPath: %v", err)
	}
	if _, err := gateway.Check(ctx, missing, 0); err == nil || !strings.Contains(err.Error(), "could not be started") {
		t.Fatalf("missing command: %v", err)
	}
}

func TestHandler_Health(t *testing.T) {
	b := newBench(t, gateway.Options{})
	b.connect(nil)
	rec := httptestGet(b.gw, "/healthz")
	var health map[string]any
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &health) != nil || health["status"] != "ok" || health["sessions"] != float64(1) {
		t.Fatalf("healthz %d %s", rec.Code, rec.Body)
	}
	b.gw.Close()
	if rec := httptestGet(b.gw, "/healthz"); rec.Code != 503 {
		t.Fatalf("healthz after close: %d", rec.Code)
	}
}
