package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/quotation"
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

// BenchmarkChannelHTTPCall times tools/calls through ListenHTTP's
// endpoint (DIDAuthV1 with Ed25519 required, stores in memory, loopback
// HTTP) on one gateway, each op one of each: a free tool (the baseline),
// and a priced one paid by a prepaid channel's receipt (quotation.Buyer's
// Transport signs it, the gateway verifies it and records it in the books
// before the call runs). The ratio of their medians is issue #30's target
// (≤ 1.1×).
func BenchmarkChannelHTTPCall(b *testing.B) {
	ctx := context.Background()
	n, sw, _ := lightningWallets(b)
	n.AddWallet("rich", 20_000_000_000) // a deposit of 10M sats
	cw, _ := n.Wallet("rich")
	up := &paidUpstream{}
	gw, err := gateway.New(ctx, gateway.Options{Upstream: gateway.InProcess(up.server()), NoNostr: true})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	store := durable.NewMemory(durable.Options{})
	key := nostr.Generate()
	pk := key.Public()
	books, err := channel.New(channel.Options{Store: store, ServerKey: pk[:], Refunder: channel.WalletRefunder{Wallet: sw}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := contextvm.ParsePrice("tool:translate=1")
	ep, err := gw.ListenHTTP(gateway.HTTPEndpointOptions{Addr: "127.0.0.1:0", Key: key, Store: store, RequireAuth: true,
		Processor: lightning.NewProcessor(sw, lightning.ProcessorOptions{PollMin: time.Millisecond}),
		Prices:    []contextvm.Price{p}, Channels: books, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Shutdown(ctx)
	s, _ := did.GenerateKey(did.Ed25519)
	hc := &http.Client{Transport: &didauth.Transport{Signer: s}}
	buyer := &quotation.Buyer{URL: ep.URL, Client: hc, Signer: s, Pay: &cep8.PayOptions{
		Budget:   &payments.Budget{Unit: "sats", PerCall: 10},
		Handlers: []payments.Handler{lightning.NewHandler(cw)},
		Channel:  &cep8.ChannelOptions{DepositSats: 10_000_000, Wallet: cw},
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ep.URL, HTTPClient: &http.Client{Transport: buyer.Transport(hc.Transport)}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	// The channel is opened (and its first receipt paid) before timing.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "translate", Arguments: map[string]any{"text": "x"}}); err != nil {
		b.Fatal(err)
	}
	// The two calls alternate, each timed on its own, so that the load of
	// a shared machine weighs on both alike; the medians and their ratio
	// are reported.
	free := &mcp.CallToolParams{Name: "free", Arguments: map[string]any{"text": "x"}}
	paid := &mcp.CallToolParams{Name: "translate", Arguments: map[string]any{"text": "x"}}
	var frees, paids []time.Duration
	timed := func(params *mcp.CallToolParams) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		return time.Since(start)
	}
	for b.Loop() {
		frees = append(frees, timed(free))
		paids = append(paids, timed(paid))
	}
	f, c := median(frees), median(paids)
	b.ReportMetric(float64(f.Nanoseconds()), "free-ns/call")
	b.ReportMetric(float64(c.Nanoseconds()), "channel-ns/call")
	b.ReportMetric(float64(c)/float64(f), "channel/free")
	if st, ok := buyer.Channel(ctx); !ok || st.Nonce != uint64(up.calls.Load()) {
		b.Fatalf("channel %+v: %d priced calls ran", st, up.calls.Load())
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
