package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkHTTPGatewayCall times one tools/call through the gateway's HTTP
// endpoint (in-process upstream, loopback HTTP): unsigned against a gateway
// without auth (the baseline), and signed with DIDAuthV1 (Ed25519) against
// one that verifies every request (signature, audience, nonce kept in a
// memory store).
func BenchmarkHTTPGatewayCall(b *testing.B) {
	for _, signed := range []bool{false, true} {
		name := "unauthenticated"
		if signed {
			name = "didauth"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			gw, err := gateway.New(ctx, gateway.Options{Upstream: gateway.InProcess(testServer()), NoNostr: true})
			if err != nil {
				b.Fatal(err)
			}
			defer gw.Close()
			var hopts gateway.HTTPOptions
			hc := &http.Client{}
			if signed {
				v, err := didauth.NewVerifier(didauth.Options{RequireAuth: true, Window: time.Hour, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				hopts = gateway.HTTPOptions{Auth: v.Middleware, Caller: didauth.Caller}
				s, _ := did.GenerateKey(did.Ed25519)
				hc.Transport = &didauth.Transport{Signer: s}
			}
			srv := httptest.NewServer(gw.HTTPHandler(hopts))
			defer srv.Close()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: srv.URL + gateway.MCPPath, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
