package contextvm_test

import (
	"context"
	"testing"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkRoundTrip measures one sequential tools/call over the embedded
// relay; go run ./bench/cvmbench compares it with the reference pair.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name string
		enc  contextvm.EncryptionMode
	}{{"plaintext", contextvm.EncryptDisabled}, {"encrypted", contextvm.EncryptRequired}} {
		b.Run(tc.name, func(b *testing.B) {
			r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
			srv := peertest.Serve(b, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer())
			cs := peertest.Connect(b, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: tc.enc})
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}}
			ctx := context.Background()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
