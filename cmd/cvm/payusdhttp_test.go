package main

import (
	"context"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
)

// A usd-priced tool over MCP HTTP, as over Nostr: the gateway quotes 0.05
// usd at its 50 000 usd a bitcoin as 100 sats; cvm tools shows the price
// as written, with its sats at the client's rate; cvm call holds the
// quotation to its own rate: without one, or when the gateway's rate
// drops to 45 000 (112 sats, 12% above), nothing is paid and it exits 2
// naming the flag; a tolerance wide enough lets it through.
func TestPayCLI_USDPriceOverHTTP(t *testing.T) {
	serverRate, clientRate := newRateEndpoint(t, "50000"), newRateEndpoint(t, "50000")
	c := newCLI(t)
	c.env["CVM_TEST_OUTBOUND_ALLOW"] = serverRate.Listener.Addr().String() + "," + clientRate.Listener.Addr().String()
	w := newHTTPPayWorldOf(t, c, append([]string{"--price", "tool:add=0.05:usd", "--usd-rate-ttl", "1ms"}, serverRate.flags()...)...)
	if err := w.ledger.Fund(context.Background(), "alice", 900); err != nil {
		t.Fatal(err)
	}
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
	if code != exitLocal || !strings.Contains(errOut, "the call costs 100 sats for a price in usd") || !strings.Contains(errOut, "give a rate source, --usd-rate-url URL and --usd-rate-pointer /PATH") {
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
	if code != exitLocal || !strings.Contains(errOut, "the call costs 112 sats, more than the usd price comes to at your rate") ||
		!strings.Contains(errOut, "at most 102 sats (2% tolerance)") {
		t.Fatalf("a stated amount 12%% above: code %d, %q", code, errOut)
	}
	wantBalances(900, 100)
	if code, _, errOut = call(append(clientRate.flags(), "--usd-rate-tolerance", "15")...); code != 0 || !strings.Contains(errOut, "paid 112 sats") {
		t.Fatalf("within a 15%% tolerance: code %d, %q", code, errOut)
	}
	wantBalances(788, 212)
}
