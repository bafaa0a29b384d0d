package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newUSDHTTPWorld is a gateway over HTTP charging 0.05 usd for add at
// the rate of serverRate (fetched for every call), alice with 1000 sats,
// and a client rate source; c's cvm processes trust both endpoints.
func newUSDHTTPWorld(t *testing.T) (w *httpPayWorld, c *cli, serverRate, clientRate *rateEndpoint) {
	t.Helper()
	serverRate, clientRate = newRateEndpoint(t, "50000"), newRateEndpoint(t, "50000")
	c = newCLI(t)
	c.env["CVM_TEST_OUTBOUND_ALLOW"] = serverRate.Listener.Addr().String() + "," + clientRate.Listener.Addr().String()
	w = newHTTPPayWorldOf(t, c, append([]string{"--price", "tool:add=0.05:usd", "--usd-rate-ttl", "1ms"}, serverRate.flags()...)...)
	if err := w.ledger.Fund(context.Background(), "alice", 900); err != nil {
		t.Fatal(err)
	}
	return w, c, serverRate, clientRate
}

// A usd-priced tool over MCP HTTP, as over Nostr: the gateway quotes 0.05
// usd at its 50 000 usd a bitcoin as 100 sats; cvm tools shows the price
// as written, with its sats at the client's rate; cvm call holds the
// quotation to its own rate: without one, or when the gateway's rate
// drops to 45 000 (112 sats, 12% above), nothing is paid and it exits 5
// naming the flag; a tolerance wide enough lets it through.
func TestPayCLI_USDPriceOverHTTP(t *testing.T) {
	w, c, serverRate, clientRate := newUSDHTTPWorld(t)
	cvm := func(args ...string) (int, string, string) {
		t.Helper()
		return cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: c.environ()}, args...)
	}
	call := func(extra ...string) (int, string, string) {
		t.Helper()
		return cvm(append([]string{"call", w.ready.HTTP, "add", "a=1", "b=2", "--wallet-file", w.clientFile, "--max-sats", "200", "--yes"}, extra...)...)
	}
	wantBalances := func(alice, srv int64) {
		t.Helper()
		if a, s := w.balances(t); a != alice || s != srv {
			t.Fatalf("alice %d, srv %d; want %d and %d", a, s, alice, srv)
		}
	}

	code, out, errOut := cvm(append([]string{"tools", w.ready.HTTP}, clientRate.flags()...)...)
	if code != 0 || !strings.Contains(out, "0.05 usd (≈ 100 sats)") {
		t.Fatalf("cvm tools: code %d, %q, %q", code, out, errOut)
	}
	code, _, errOut = call()
	if code != exitPayment || !strings.Contains(errOut, "the call costs 100 sats for a price in usd") || !strings.Contains(errOut, "give a rate source, --usd-rate-url URL and --usd-rate-pointer /PATH") {
		t.Fatalf("no client rate source: code %d, %q", code, errOut)
	}
	wantBalances(1000, 0)
	code, out, errOut = call(clientRate.flags()...)
	if code != 0 || out != `{"sum":3}`+"\n" || !strings.Contains(errOut, "paid 100 sats") {
		t.Fatalf("usd call: code %d, %q, %q", code, out, errOut)
	}
	wantBalances(900, 100)

	serverRate.price.Store("45000")
	code, _, errOut = call(clientRate.flags()...)
	if code != exitPayment || !strings.Contains(errOut, "the call costs 112 sats, more than the usd price comes to at your rate") ||
		!strings.Contains(errOut, "at most 102 sats (2% tolerance)") {
		t.Fatalf("a stated amount 12%% above: code %d, %q", code, errOut)
	}
	wantBalances(900, 100)
	if code, _, errOut = call(append(clientRate.flags(), "--usd-rate-tolerance", "15")...); code != 0 || !strings.Contains(errOut, "paid 112 sats") {
		t.Fatalf("within a 15%% tolerance: code %d, %q", code, errOut)
	}
	wantBalances(788, 212)
}

// cvm proxy on an http:// server holds a usd price's quotation to its
// own rate, learnt from the host's tools/list: 112 sats asked for 0.05
// usd, where its rate makes it 100, is declined within a 200-sat cap;
// at the same rate the call is paid.
func TestPayProxy_USDPriceOverHTTP(t *testing.T) {
	w, c, serverRate, clientRate := newUSDHTTPWorld(t)
	serverRate.price.Store("45000")
	p := startCVM(t, c, append([]string{"proxy", w.ready.HTTP, "--wallet-file", w.clientFile, "--max-sats", "200"}, clientRate.flags()...)...)
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	accept := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, accept).Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(p.Stdout), Writer: p.Stdin}, nil)
	if err != nil {
		t.Fatalf("connect to the proxy: %v; stderr: %s", err, p.Stderr)
	}
	defer func() { cs.Close(); p.Wait(t) }()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	add := &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}}
	_, err = cs.CallTool(ctx, add)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodePaymentDeclined || !strings.Contains(werr.Message, "at most 102 sats") {
		t.Fatalf("112 sats for 0.05 usd: %v", err)
	}
	if a, s := w.balances(t); a != 1000 || s != 0 {
		t.Fatalf("after the decline: alice %d srv %d", a, s)
	}
	serverRate.price.Store("50000")
	if res, err := cs.CallTool(ctx, add); err != nil || res.IsError {
		t.Fatalf("100 sats for 0.05 usd: %v %+v; stderr %s", err, res, p.Stderr)
	}
	if a, s := w.balances(t); a != 900 || s != 100 {
		t.Fatalf("alice %d srv %d, want 900 and 100", a, s)
	}
}
