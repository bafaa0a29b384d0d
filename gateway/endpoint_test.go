package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// endpointBench is a gateway serving only HTTP, through ListenHTTP, with
// a priced tool collected over a simulated Lightning network.
type endpointBench struct {
	ep     *gateway.HTTPEndpoint
	up     *paidUpstream
	client *lnsim.Wallet
}

func newEndpointBench(t *testing.T, opts gateway.HTTPEndpointOptions) (*endpointBench, error) {
	t.Helper()
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	_, sw, cw := lightningWallets(t)
	up := &paidUpstream{}
	gw := startGateway(t, ctx, gateway.Options{Upstream: gateway.InProcess(up.server()), NoNostr: true})
	opts.Addr, opts.Key = "127.0.0.1:0", nostr.Generate()
	if opts.Store == nil {
		opts.Store = durable.NewMemory(durable.Options{})
	}
	opts.Processor = lightning.NewProcessor(sw, lightning.ProcessorOptions{PollMin: time.Millisecond})
	ep, err := gw.ListenHTTP(opts)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { ep.Shutdown(context.Background()) })
	return &endpointBench{ep: ep, up: up, client: cw}, nil
}

func price(t *testing.T, s string) contextvm.Price {
	t.Helper()
	p, err := contextvm.ParsePrice(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A Go program embedding a gateway and another buying from it over HTTP
// need nothing of the CLI: ListenHTTP serves the DID document, refuses
// unsigned requests when asked to, and refuses a priced call until a
// quotation.Buyer has bought it.
func TestListenHTTP_SignedPaidCallThroughTheBuyer(t *testing.T) {
	b, err := newEndpointBench(t, gateway.HTTPEndpointOptions{RequireAuth: true, Prices: []contextvm.Price{price(t, "tool:translate=10")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.ep.URL, "http://127.0.0.1:") || !strings.HasSuffix(b.ep.URL, gateway.MCPPath) || !strings.HasPrefix(b.ep.DID, "did:nostr:") {
		t.Fatalf("endpoint %q, DID %q", b.ep.URL, b.ep.DID)
	}
	resp, err := http.Get(strings.TrimSuffix(b.ep.URL, gateway.MCPPath) + gateway.DIDDocumentPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(doc, &d); err != nil || d.ID != b.ep.DID || !strings.Contains(string(doc), b.ep.URL) {
		t.Fatalf("DID document %s (%v), want id %s naming %s", doc, err, b.ep.DID, b.ep.URL)
	}
	resp, err = http.Post(b.ep.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned request: HTTP %d, want 401", resp.StatusCode)
	}

	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	hc := signing(newSigner(t))
	cs, err := newClient(nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.ep.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if quotation.Priced(tool) != (tool.Name == "translate") {
			t.Errorf("tool %s priced: %v", tool.Name, quotation.Priced(tool))
		}
	}
	args := map[string]any{"text": "hello"}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "translate", Arguments: args}); !quotation.IsRequired(err) {
		t.Fatalf("unpaid call: %v, want a quotation required", err)
	}

	none := quotation.Buyer{URL: b.ep.URL, Client: hc}
	_, err = none.Buy(ctx, "translate", args)
	if werr := (*jsonrpc.Error)(nil); !errors.As(err, &werr) || werr.Code != contextvm.CodePaymentDeclined {
		t.Fatalf("a buyer without payments: %v, want a declined payment", err)
	}
	buyer := quotation.Buyer{URL: b.ep.URL, Client: hc, Pay: &cep8.PayOptions{
		Budget:   &payments.Budget{Unit: "sats", PerCall: 10},
		Handlers: []payments.Handler{lightning.NewHandler(b.client)},
	}}
	id, err := buyer.Buy(ctx, "translate", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "translate", Arguments: args, Meta: mcp.Meta{quotation.MetaQuotation: id}})
	if err != nil || res.IsError {
		t.Fatalf("paid call: %v %+v", err, res)
	}
	if got := b.up.calls.Load(); got != 1 {
		t.Fatalf("translate ran %d times, want once", got)
	}
}

// What ListenHTTP cannot serve is an OptionError naming the field, so
// that a CLI can name its flag.
func TestListenHTTP_OptionErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  gateway.HTTPEndpointOptions
		field string
		is    error
	}{
		{"a priced prompt", gateway.HTTPEndpointOptions{Prices: []contextvm.Price{price(t, "prompt:greet=5")}}, "Prices", gateway.ErrPriceNotTool},
		{"a bad allow entry", gateway.HTTPEndpointOptions{Allow: []string{"not a key"}}, "Allow", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newEndpointBench(t, tc.opts)
			var oe *gateway.OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("ListenHTTP: %v, want an OptionError on %s", err, tc.field)
			}
		})
	}
}
