package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway announces its upstream's lists, with the server's prices,
// and announces them again when the upstream's tools change; Close stops it.
func TestGateway_AnnouncesAndKeepsAnnouncementsCurrent(t *testing.T) {
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
	b := newBenchServer(t, gateway.Options{Upstream: gateway.InProcess(upstream)}, contextvm.ServerOptions{
		Announce: true,
		Prices:   []contextvm.Price{{Capability: "tool:first", Amount: "4"}},
	})

	// A live subscription: every announcement the gateway publishes
	// arrives here, in order, with no polling.
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{b.relay}})
	defer pool.Close()
	sub := pool.Subscribe(nostr.Filter{Authors: []nostr.PubKey{b.srv.PublicKey()}, Kinds: []nostr.Kind{contextvm.KindToolsList}}, 16)
	defer sub.Close()
	tools := func(want string) nostr.Event {
		t.Helper()
		timeout := time.After(testwait.Timeout(patience))
		for {
			select {
			case evt := <-sub.Events():
				if strings.Contains(evt.Content, want) {
					return evt
				}
			case <-timeout:
				t.Fatalf("no tools announcement with %s", want)
				return nostr.Event{}
			}
		}
	}
	first := tools(`"first"`)
	if first.Tags.FindWithValue("cap", "tool:first") == nil {
		t.Errorf("tags %v", first.Tags)
	}
	tool("second")
	tools(`"second"`)
}
