package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestParseCapability(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want gateway.Capability
		ok   bool
	}{
		{"tools/list", gateway.Capability{Method: "tools/list"}, true},
		{"tools/call:get_weather", gateway.Capability{Method: "tools/call", Name: "get_weather"}, true},
		{"resources/read:file:///notes.txt", gateway.Capability{Method: "resources/read", Name: "file:///notes.txt"}, true},
		{"ping", gateway.Capability{Method: "ping"}, true},
		{"", gateway.Capability{}, false},
		{"get_weather", gateway.Capability{}, false},
		{":x", gateway.Capability{}, false},
	} {
		got, err := gateway.ParseCapability(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCapability(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

func TestAccess_Permits(t *testing.T) {
	allowed, stranger := nostr.Generate().Public(), nostr.Generate().Public()
	call := func(name string) json.RawMessage { return json.RawMessage(`{"name":"` + name + `"}`) }
	open := gateway.Access{}
	closed := gateway.Access{Allow: []nostr.PubKey{allowed}}
	public := gateway.Access{Allow: []nostr.PubKey{allowed}, Public: []gateway.Capability{
		{Method: "tools/list"}, {Method: "tools/call", Name: "echo"},
	}}
	for _, tc := range []struct {
		name   string
		access gateway.Access
		client nostr.PubKey
		method string
		params json.RawMessage
		want   bool
	}{
		{"no allow-list serves everyone", open, stranger, "tools/call", call("x"), true},
		{"allowed key", closed, allowed, "tools/call", call("x"), true},
		{"stranger, nothing public", closed, stranger, "tools/list", nil, false},
		{"stranger may not even initialize", closed, stranger, "initialize", nil, false},
		{"stranger may initialize to reach public capabilities", public, stranger, "initialize", nil, true},
		{"stranger may ping", public, stranger, "ping", nil, true},
		{"public method", public, stranger, "tools/list", nil, true},
		{"public tool", public, stranger, "tools/call", call("echo"), true},
		{"other tool", public, stranger, "tools/call", call("crash"), false},
		{"other method", public, stranger, "resources/list", nil, false},
	} {
		if got := tc.access.Permits(tc.client, tc.method, tc.params); got != tc.want {
			t.Errorf("%s: Permits = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAccess_RefusedRequestsGetAnError(t *testing.T) {
	for _, mode := range []gateway.SessionMode{gateway.PerClient, gateway.Shared} {
		t.Run(mode.String(), func(t *testing.T) {
			friend := nostr.Generate()
			b := newBench(t, gateway.Options{Mode: mode, Access: gateway.Access{
				Allow:  []nostr.PubKey{friend.Public()},
				Public: []gateway.Capability{{Method: "tools/list"}, {Method: "tools/call", Name: "echo"}},
			}})
			stranger := b.connect(nil)
			if _, err := stranger.ListTools(context.Background(), nil); err != nil {
				t.Fatalf("public tools/list: %v", err)
			}
			if got := call(t, stranger, "echo", map[string]any{"text": "hi"}); got != "hi" {
				t.Fatalf("public tool: %q", got)
			}
			_, err := tryCall(stranger, "pid", nil)
			if werr := rpcError(t, err); werr.Code != gateway.CodeUnauthorized || !strings.Contains(werr.Message, "Unauthorized") || !strings.Contains(werr.Message, `"pid"`) {
				t.Fatalf("private tool: %v", err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs, err := contextvm.Connect(ctx, newClient(nil), contextvm.ClientOptions{
				Server: b.srv.PublicKey().Hex(), Relays: []string{b.relay}, Signer: contextvm.NewKeySigner(friend),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call(t, cs, "pid", nil)
			if n := b.metric(`cvm_gateway_refused_total{reason="unauthorized"}`); n != 1 {
				t.Errorf("unauthorized refusals %v", n)
			}
		})
	}
}

func TestAccess_StrangerCannotOpenASession(t *testing.T) {
	b := newBench(t, gateway.Options{Access: gateway.Access{Allow: []nostr.PubKey{nostr.Generate().Public()}}})
	_, err := b.tryConnectClient(mcp.NewClient(&mcp.Implementation{Name: "stranger", Version: "1"}, nil))
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("connect: %v", err)
	}
	if n := b.metric("cvm_gateway_upstream_sessions"); n != 0 {
		t.Errorf("a refused client started %v upstream sessions", n)
	}
}
