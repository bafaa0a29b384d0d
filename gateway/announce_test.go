package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway announces its upstream's lists, with the server's prices,
// and announces them again when the upstream's tools change.
func TestKeepAnnounced(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	upstream := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	type in struct {
		X string `json:"x"`
	}
	tool := func(name string) {
		mcp.AddTool(upstream, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	}
	tool("first")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL},
		Prices: []contextvm.Price{{Capability: "tool:first", Amount: "4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		gateway.KeepAnnounced(ctx, gateway.InProcess(upstream), srv, nil)
	}()

	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	tools := func(want string) nostr.Event {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			evts, _ := pool.Query(qctx, nostr.Filter{Authors: []nostr.PubKey{srv.PublicKey()}, Kinds: []nostr.Kind{contextvm.KindToolsList}})
			qcancel()
			if len(evts) == 1 && strings.Contains(evts[0].Content, want) {
				return evts[0]
			}
		}
		t.Fatalf("no tools announcement with %s", want)
		return nostr.Event{}
	}
	first := tools(`"first"`)
	if first.Tags.FindWithValue("cap", "tool:first") == nil {
		t.Errorf("tags %v", first.Tags)
	}
	tool("second")
	tools(`"second"`)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("KeepAnnounced did not return when its context ended")
	}
}
