package gateway_test

import (
	"context"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
)

// Who may call what is decided by the contextvm server (cvm gateway's
// --allow and --public): a refused request is answered there and never
// reaches the gateway, so it starts no upstream session and costs the
// upstream nothing.
func TestAuthorization_RefusedRequestsNeverReachTheUpstream(t *testing.T) {
	for _, mode := range []gateway.SessionMode{gateway.PerClient, gateway.Shared} {
		t.Run(mode.String(), func(t *testing.T) {
			friend := nostr.Generate()
			b := newBenchServer(t, gateway.Options{Mode: mode}, contextvm.ServerOptions{
				AllowedClients:     []nostr.PubKey{friend.Public()},
				PublicCapabilities: []contextvm.Capability{{Method: "tools/list"}, {Method: "tools/call", Name: "echo"}},
			})
			stranger := b.connect(nil)
			if _, err := stranger.ListTools(context.Background(), nil); err != nil {
				t.Fatalf("public tools/list: %v", err)
			}
			if got := call(t, stranger, "echo", map[string]any{"text": "hi"}); got != "hi" {
				t.Fatalf("public tool: %q", got)
			}
			_, err := tryCall(stranger, "pid", nil)
			if werr := rpcError(t, err); werr.Code != contextvm.CodeUnauthorized || !strings.Contains(werr.Message, "pid") {
				t.Fatalf("private tool: %v", err)
			}
			if n := b.metric(`cvm_gateway_requests_total{method="tools/call",outcome="ok"}`); n != 1 {
				t.Errorf("the upstream answered %v tool calls, want 1: the refused one reached it", n)
			}

			ctx, cancel := testwait.Context(t, patience)
			defer cancel()
			cs, err := contextvm.Connect(ctx, newClient(nil), contextvm.ClientOptions{
				Server: b.srv.PublicKey().Hex(), Relays: []string{b.relay}, Signer: contextvm.NewKeySigner(friend),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call(t, cs, "pid", nil)
		})
	}
}

func TestAuthorization_StrangerStartsNoUpstream(t *testing.T) {
	b := newBenchServer(t, gateway.Options{}, contextvm.ServerOptions{AllowedClients: []nostr.PubKey{nostr.Generate().Public()}})
	if _, err := b.tryConnect(nil); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("connect: %v", err)
	}
	if n := b.metric("cvm_gateway_upstream_sessions"); n != 0 {
		t.Errorf("a refused client started %v upstream sessions", n)
	}
}
