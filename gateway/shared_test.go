package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestShared_OneUpstreamAnswersEveryInitialize(t *testing.T) {
	b := newBench(t, gateway.Options{Mode: gateway.Shared})
	a, c := b.connect(nil), b.connect(nil)
	if pa, pc := call(t, a, "pid", nil), call(t, c, "pid", nil); pa != pc {
		t.Fatalf("shared mode ran two upstreams: %s and %s", pa, pc)
	}
	for _, cs := range []*mcp.ClientSession{a, c} {
		res := cs.InitializeResult()
		if res.ServerInfo.Name != "gateway-test-upstream" || res.Instructions != testInstructions || !res.Capabilities.Resources.Subscribe {
			t.Errorf("initialize result %+v", res)
		}
	}
	if n := b.metric("cvm_gateway_upstream_sessions"); n != 1 {
		t.Errorf("upstream sessions %v, want 1", n)
	}
}

func TestShared_RequestIDsAndProgressTokensDoNotCollide(t *testing.T) {
	b := newBench(t, gateway.Options{Mode: gateway.Shared})
	type client struct {
		cs       *mcp.ClientSession
		mu       sync.Mutex
		progress []float64
		totals   []float64
	}
	clients := make([]*client, 3)
	for i := range clients {
		c := &client{}
		c.cs = b.connect(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params.Progress)
			c.totals = append(c.totals, req.Params.Total)
			c.mu.Unlock()
		}})
		clients[i] = c
	}
	// Every client numbers its requests from the same start and uses the
	// same progress token; each must get its own answers and progress.
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 60 * (i + 1), "steps": i + 2}}
			params.SetProgressToken("same-token")
			if _, err := c.cs.CallTool(context.Background(), params); err != nil {
				t.Error(err)
			}
			for j := range 5 {
				want := fmt.Sprintf("client %d call %d", i, j)
				if got := call(t, c.cs, "echo", map[string]any{"text": want}); got != want {
					t.Errorf("echo: got %q, want %q", got, want)
				}
			}
		})
	}
	wg.Wait()
	// Client i's call reports i+2 steps, each with total i+2: a
	// notification with another total is another client's. (That the mux
	// never misroutes one, even late, is internal/mcpmux's test, where
	// delivery is synchronous.)
	for i, c := range clients {
		testwait.Eventually(t, patience, "progress", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.progress) >= i+2 })
		c.mu.Lock()
		for _, total := range c.totals {
			if total != float64(i+2) {
				t.Errorf("client %d got progress of a call with %v steps (%v): another client's", i, total, c.progress)
			}
		}
		c.mu.Unlock()
	}
}

func TestShared_SubscriptionsAreTrackedPerClient(t *testing.T) {
	b := newBench(t, gateway.Options{Mode: gateway.Shared})
	updates := func() (chan string, *mcp.ClientOptions) {
		ch := make(chan string, 8)
		return ch, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			ch <- req.Params.URI
		}}
	}
	aUpdates, aOpts := updates()
	cUpdates, cOpts := updates()
	a, c := b.connect(aOpts), b.connect(cOpts)
	ctx := context.Background()

	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://b"}); err != nil {
		t.Fatal(err)
	}
	// The upstream heard one subscribe per resource.
	if got := call(t, a, "subs", nil); got != "subscribe=2 unsubscribe=0" {
		t.Errorf("upstream saw %s", got)
	}
	call(t, a, "touch", map[string]any{"uri": "test://b"})
	if uri := within(t, cUpdates, "update for the subscriber"); uri != "test://b" {
		t.Errorf("c got %q", uri)
	}
	select {
	case uri := <-aUpdates:
		t.Fatalf("a got an update for %s, which it did not subscribe to", uri)
	case <-time.After(300 * time.Millisecond):
	}

	// The upstream is unsubscribed only when the last subscriber leaves.
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	if got := call(t, a, "subs", nil); got != "subscribe=2 unsubscribe=0" {
		t.Errorf("after one of two unsubscribed, upstream saw %s", got)
	}
	call(t, c, "touch", map[string]any{"uri": "test://a"})
	if uri := within(t, cUpdates, "update for the remaining subscriber"); uri != "test://a" {
		t.Errorf("c got %q", uri)
	}
	if err := c.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	if got := call(t, a, "subs", nil); got != "subscribe=2 unsubscribe=1" {
		t.Errorf("after the last unsubscribed, upstream saw %s", got)
	}
}

func TestShared_ServerToClientRequestsGoToTheOneClientInFlight(t *testing.T) {
	b := newBench(t, gateway.Options{Mode: gateway.Shared})
	a := b.connect(&mcp.ClientOptions{CreateMessageHandler: sampler})
	other := b.connectInFlight(nil) // declares no sampling

	if got := call(t, a, "sample", map[string]any{"text": "hi"}); got != "sampled: hi" {
		t.Fatalf("with one client in flight: %q", got)
	}
	if _, err := tryCall(other.cs, "sample", map[string]any{"text": "hi"}); err == nil || !strings.Contains(err.Error(), "did not declare") {
		t.Fatalf("client without sampling: %v", err)
	}

	// Two clients in flight: nothing says whose request it is.
	slow := other.slow(t, 1500)
	_, err := tryCall(a, "sample", map[string]any{"text": "hi"})
	if err == nil || !strings.Contains(err.Error(), "2 clients have requests in flight") || !strings.Contains(err.Error(), "per-client") {
		t.Fatalf("with two clients in flight: %v; want a refusal that says why and what to do", err)
	}
	if err := within(t, slow, "slow call"); err != nil {
		t.Fatal(err)
	}
	if n := b.metric(`cvm_gateway_refused_total{reason="unroutable"}`); n != 2 {
		t.Errorf("unroutable refusals %v, want 2", n)
	}
}

func TestShared_ChildCrash(t *testing.T) {
	b := newBench(t, gateway.Options{Mode: gateway.Shared})
	updated := make(chan string, 4)
	a := b.connect(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}})
	c := b.connectInFlight(nil)
	pid := call(t, a, "pid", nil)
	if err := a.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	slow := c.slow(t, 10000)
	if _, err := tryCall(a, "crash", map[string]any{"code": 4}); err == nil || !strings.Contains(err.Error(), "exit status 4") {
		t.Fatalf("crash: %v", err)
	}
	if err := within(t, slow, "answer to the other client's call"); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("other client's call in flight: %v", err)
	}
	for _, cs := range []*mcp.ClientSession{a, c.cs} {
		var again string
		testwait.Eventually(t, patience, "the shared upstream to be back", func() bool {
			var err error
			again, err = tryCall(cs, "pid", nil)
			return err == nil
		})
		if again == pid {
			t.Fatal("same upstream after a crash")
		}
	}
	call(t, c.cs, "touch", map[string]any{"uri": "test://a"})
	if uri := within(t, updated, "update after the restart"); uri != "test://a" {
		t.Errorf("updated %q", uri)
	}
}

func TestShared_UpstreamThatDoesNotStartFailsNew(t *testing.T) {
	_, err := gateway.New(context.Background(), gateway.Options{Mode: gateway.Shared, Upstream: child("exit")})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("New: %v", err)
	}
}
