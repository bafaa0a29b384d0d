package contextvm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// With two relays configured, killing one in the middle of a run of calls
// loses none: each completes (through the other) or fails clearly within its
// deadline.
func TestOneRelayDiesMidRun(t *testing.T) {
	doomed, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer doomed.Close()
	survivor := relaytest.Start(t, relay.Options{})
	relays := []string{doomed.URL, survivor.URL}
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: relays}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: relays, RequestTimeout: testwait.Timeout(10 * time.Second)})
	for i := range 20 {
		if i == 5 {
			doomed.Close()
		}
		ctx, cancel := testwait.Context(t, 15*time.Second)
		want := fmt.Sprint("call ", i)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
		cancel()
		if err != nil {
			t.Fatalf("call %d after the relay died: %v", i, err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != want {
			t.Fatalf("call %d: %q", i, got)
		}
	}
}

// Relays that serve gift wraps only to their NIP-42-authenticated recipient:
// both sides answer the AUTH challenge with their own key.
func TestAuthRequiringRelay(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Auth: true})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptRequired, GiftWrap: contextvm.WrapPersistent}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptRequired, GiftWrap: contextvm.WrapPersistent})
	if got := peertest.CallEcho(t, cs, "authenticated"); got != "authenticated" {
		t.Fatalf("echo = %q", got)
	}
}
