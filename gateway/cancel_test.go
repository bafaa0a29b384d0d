package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that gives up on a request cancels it upstream: the handler's
// context ends. In Shared mode the gateway translates the request id.
func TestCancellationReachesTheUpstream(t *testing.T) {
	for _, mode := range []gateway.SessionMode{gateway.PerClient, gateway.Shared} {
		t.Run(mode.String(), func(t *testing.T) {
			b := newBench(t, gateway.Options{Mode: mode})
			cs := b.connect(nil)
			other := b.connect(nil) // shared mode: ids of two clients in play
			call(t, other, "echo", map[string]any{"text": "x"})
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 10000}}); err == nil {
				t.Fatal("a call cancelled after 300 ms succeeded")
			}
			testwait.Eventually(t, patience, "the upstream handler to be cancelled", func() bool { return call(t, cs, "cancelled", nil) == "1" })
		})
	}
}

// In Shared mode, a client session that ends (here: reaped when idle) gives
// up its subscriptions: the last subscriber leaving unsubscribes upstream.
func TestShared_ALeavingClientsSubscriptionsAreDropped(t *testing.T) {
	b := newBench(t, gateway.Options{Mode: gateway.Shared, IdleTimeout: 300 * time.Millisecond})
	leaving := b.connect(nil)
	if err := leaving.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	staying := b.connect(nil)
	testwait.Eventually(t, patience, "the idle client to be reaped and its subscription dropped upstream", func() bool {
		return call(t, staying, "subs", nil) == "subscribe=1 unsubscribe=1"
	})
}
