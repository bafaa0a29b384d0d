package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/cvmgo/cvm/proxy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pricedEndpoint is a gateway over HTTP only whose tool "translate"
// costs 10 sats, collected on a fake ledger where alice has 100.
func pricedEndpoint(t *testing.T, ctx context.Context) (url string, ledger *payments.Ledger, ran func() int64) {
	t.Helper()
	var calls atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "priced", Version: "1"}, nil)
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "translate"}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fr:" + in.Text}}}, nil, nil
	})
	gw, err := gateway.New(ctx, gateway.Options{Upstream: gateway.InProcess(s), NoNostr: true})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		gw.Serve(context.Background())
	}()
	ledger = payments.NewLedger(map[string]int64{"alice": 100})
	price, err := contextvm.ParsePrice("tool:translate=10")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := gw.ListenHTTP(gateway.HTTPEndpointOptions{Addr: "127.0.0.1:0", Key: nostr.Generate(),
		Store:     durable.NewMemory(durable.Options{}),
		Processor: &payments.FakeProcessor{Ledger: ledger, Payee: "srv"}, Prices: []contextvm.Price{price}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gw.Close()
		<-served
		ep.Shutdown(context.Background())
	})
	return ep.URL, ledger, func() int64 { return calls.Load() }
}

// connTransport hands a go-sdk client one connection made beforehand.
type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// A client through a PayingConn calls a priced tool as a free one: the
// connection learns the price from tools/list, buys the quotation and
// sends the call naming it; without payments, the call is answered with
// the refusal, and the tool never runs unpaid.
func TestPayingConn_BuysPricedCalls(t *testing.T) {
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	url, ledger, ran := pricedEndpoint(t, ctx)
	// Quotations are bound to the caller's DID: the host signs.
	signer, err := did.GenerateKey(did.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	hc := &http.Client{Transport: &didauth.Transport{Base: base, Signer: signer}}
	for _, tc := range []struct {
		name string
		pay  *cep8.PayOptions
		runs int64
	}{
		{"without payments", nil, 0},
		{"within the budget", &cep8.PayOptions{
			Budget:   &payments.Budget{Unit: "sats", PerCall: 10},
			Handlers: []payments.Handler{&payments.FakeHandler{Ledger: ledger, Payer: "alice"}},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := (&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}).Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pc := proxy.NewPayingConn(conn, &quotation.Buyer{URL: url, Client: hc, Pay: tc.pay})
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, connTransport{pc}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "translate", Arguments: map[string]any{"text": "hello"}})
			var werr *jsonrpc.Error
			switch {
			case tc.pay == nil && (!errors.As(err, &werr) || werr.Code != contextvm.CodePaymentDeclined):
				t.Fatalf("unpaid call: %v, want a declined payment", err)
			case tc.pay != nil && (err != nil || res.IsError):
				t.Fatalf("paid call: %v %+v", err, res)
			}
			if got := ran(); got != tc.runs {
				t.Fatalf("translate ran %d times, want %d", got, tc.runs)
			}
		})
	}
}
