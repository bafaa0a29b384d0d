package contextvm_test

import (
	"context"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestGoClientGoServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	for _, enc := range []contextvm.EncryptionMode{contextvm.EncryptDisabled, contextvm.EncryptOptional, contextvm.EncryptRequired} {
		t.Run(enc.String(), func(t *testing.T) {
			srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: enc, Info: contextvm.ServerInfo{Name: "test"}}, peertest.EchoServer())
			clientKey := nostr.Generate()
			cs := peertest.Connect(t, contextvm.ClientOptions{
				Server:     srv.PublicKey().Hex(),
				Relays:     []string{r.URL},
				Signer:     contextvm.NewKeySigner(clientKey),
				Encryption: enc,
			})
			if got := cs.InitializeResult().ServerInfo.Name; got != "cvm-test-server" {
				t.Errorf("server name %q", got)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != contextvm.ProtocolVersion {
				t.Errorf("protocol %q", got)
			}
			if got := peertest.CallEcho(t, cs, "hello"); got != "hello" {
				t.Errorf("echo = %q", got)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.StructuredContent.(map[string]any)["pubkey"]; got != clientKey.Public().Hex() {
				t.Errorf("ClientPubkey = %v, want %s", got, clientKey.Public().Hex())
			}
		})
	}
}
