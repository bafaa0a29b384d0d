package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// rateEndpoint is a loopback usd rate source: {"data":{"amount":"PRICE"}},
// or a 500 when its price is "".
type rateEndpoint struct {
	*httptest.Server
	price atomic.Value // string
}

func newRateEndpoint(t *testing.T, price string) *rateEndpoint {
	e := &rateEndpoint{}
	e.price.Store(price)
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p := e.price.Load().(string)
		if p == "" {
			http.Error(w, "rates are down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":{"amount":%q,"base":"BTC","currency":"USD"}}`, p)
	}))
	t.Cleanup(e.Close)
	return e
}

// flags are the rate flags naming e.
func (e *rateEndpoint) flags() []string {
	return []string{"--usd-rate-url", e.URL + "/v2/prices/BTC-USD/spot", "--usd-rate-pointer", "/data/amount"}
}

// usdWorld is a relay, cvm wallet-sim with srv (0 sats) and alice (1000
// sats), a gateway charging 0.05 usd for add, converted at the rate of
// serverRate (fetched for every call: --usd-rate-ttl 1ms), and a client
// rate source; the cvm processes trust both loopback endpoints (the test
// build's outbound trust).
type usdWorld struct {
	lnWorld
	serverRate, clientRate *rateEndpoint
}

func newUSDWorld(t *testing.T) *usdWorld {
	t.Helper()
	w := &usdWorld{serverRate: newRateEndpoint(t, "50000"), clientRate: newRateEndpoint(t, "50000")}
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	w.relay, w.c = r.URL, newCLI(t)
	w.c.env["CVM_TEST_OUTBOUND_ALLOW"] = w.serverRate.Listener.Addr().String() + "," + w.clientRate.Listener.Addr().String()
	_, w.sim = startWalletSim(t, w.c, "--relay", r.URL, "--wallet", "srv=0", "--wallet", "alice=1000")
	dir := t.TempDir()
	srvWallet := writeSecret(t, dir, "srv.wallet", w.sim.Wallets["srv"])
	w.aliceWallet = writeSecret(t, dir, "alice.wallet", w.sim.Wallets["alice"])
	args := append([]string{"gateway", "--relay", r.URL, "--price", "tool:add=0.05:usd", "--wallet-file", srvWallet, "--usd-rate-ttl", "1ms"}, w.serverRate.flags()...)
	w.gateway = startCVM(t, w.c, append(args, "--", demoServer(t))...)
	var ready gatewayReady
	w.gateway.ReadyLine(t, &ready)
	w.npub = ready.Npub
	return w
}

// cvm runs the cvm binary (whose outbound fetcher trusts the rate
// endpoints) to its end.
func (w *usdWorld) cvm(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: w.c.environ()}, args...)
}

// call is cvm call add a=1 b=2, paying within 200 sats, with extra flags.
func (w *usdWorld) call(t *testing.T, extra ...string) (code int, stdout, stderr string) {
	t.Helper()
	return w.cvm(t, append([]string{"call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.aliceWallet, "--max-sats", "200", "--yes"}, extra...)...)
}

func (w *usdWorld) wantBalances(t *testing.T, alice, srv int64) {
	t.Helper()
	if a, s := w.balances(t); a != alice*1000 || s != srv*1000 {
		t.Fatalf("alice %d msat, srv %d msat; want %d and %d sats", a, s, alice, srv)
	}
}

// A usd-priced tool end to end: the gateway converts 0.05 usd at its
// 50 000 usd a bitcoin into exactly 100 sats and asks for them; cvm call,
// converting at its own rate, pays them through the wallet simulator;
// cvm tools shows both units. When the gateway's rate drops to 45 000
// (0.05 usd is then 112 sats, 10% above the client's 100), the client
// refuses to pay, though its cap would allow it, and the call comes from
// the tools it remembered rather than tools/list.
func TestPayCLI_USDPriceEndToEnd(t *testing.T) {
	w := newUSDWorld(t)
	code, out, errOut := w.call(t, w.clientRate.flags()...)
	if code != 0 || out != `{"sum":3}`+"\n" || !strings.Contains(errOut, "paid 100 sats to "+w.npub+" for tool:add") {
		t.Fatalf("usd call: code %d, %q, %q", code, out, errOut)
	}
	w.wantBalances(t, 900, 100)

	code, out, errOut = w.cvm(t, append([]string{"tools", w.npub, "--relay", w.relay}, w.clientRate.flags()...)...)
	if code != 0 || !strings.Contains(out, "0.05 usd (≈ 100 sats)") {
		t.Fatalf("cvm tools: code %d, %q, %q", code, out, errOut)
	}

	w.serverRate.price.Store("45000")
	code, _, errOut = w.call(t, w.clientRate.flags()...)
	if code != exitPayment || !strings.Contains(errOut, "the call costs 112 sats, more than the usd price comes to at your rate") ||
		!strings.Contains(errOut, "at most 102 sats (2% tolerance)") {
		t.Fatalf("a stated amount 12%% above: code %d, %q", code, errOut)
	}
	// A tolerance wide enough lets it through.
	if code, _, errOut = w.call(t, append(w.clientRate.flags(), "--usd-rate-tolerance", "15")...); code != 0 || !strings.Contains(errOut, "paid 112 sats") {
		t.Fatalf("within a 15%% tolerance: code %d, %q", code, errOut)
	}
	w.wantBalances(t, 788, 212)
}

// Nothing is paid for a usd price that cannot be converted: a client
// without a rate source declines and says which flags give one; a client
// whose source fails declines; a gateway whose source fails refuses the
// call (-32016) before asking anything; a gateway with a usd price and no
// rate source at all does not start.
func TestPayCLI_USDWithoutARateNothingIsPaid(t *testing.T) {
	w := newUSDWorld(t)
	code, _, errOut := w.call(t)
	if code != exitPayment || !strings.Contains(errOut, "the call costs 100 sats for a price in usd") || !strings.Contains(errOut, "give a rate source, --usd-rate-url URL and --usd-rate-pointer /PATH") {
		t.Fatalf("no client rate source: code %d, %q", code, errOut)
	}
	w.clientRate.price.Store("")
	if code, _, errOut = w.call(t, w.clientRate.flags()...); code != exitPayment || !strings.Contains(errOut, "the usd rate source failed: usdrate: fetch the rate") || strings.Contains(errOut, "give a rate source") {
		t.Fatalf("a failing client rate source: code %d, %q", code, errOut)
	}
	w.clientRate.price.Store("50000")
	w.serverRate.price.Store("")
	if code, _, errOut = w.call(t, w.clientRate.flags()...); code != exitPayment || !strings.Contains(errOut, "priced in usd, and the server has no usd rate") {
		t.Fatalf("a failing gateway rate source: code %d, %q", code, errOut)
	}
	w.wantBalances(t, 1000, 0)

	code, _, errOut = w.cvm(t, "gateway", "--relay", w.relay, "--price", "tool:add=0.05:usd", "--wallet-file", writeSecret(t, t.TempDir(), "w", w.sim.Wallets["srv"]), "--", demoServer(t))
	if code != exitLocal || !strings.Contains(errOut, "give the rate source, --usd-rate-url URL") {
		t.Fatalf("a gateway without a rate source: code %d, %q", code, errOut)
	}
}

// The rate flags are checked before anything is sent, each refusal
// naming the flag: a pointer without an endpoint, an endpoint cvm would
// not fetch (this test build, unlike the binary tests start, trusts no
// loopback server), a TTL of zero, a tolerance that is no percentage.
func TestPayCLI_USDRateFlagsAreCheckedFirst(t *testing.T) {
	c := newCLI(t)
	base := []string{"call", strings.Repeat("ab", 32), "add", "--relay", "ws://127.0.0.1:1", "--max-sats", "10"}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--usd-rate-pointer", "/data/amount"}, "--usd-rate-pointer \"/data/amount\" without --usd-rate-url"},
		{[]string{"--usd-rate-url", "http://127.0.0.1:9/rate"}, "--usd-rate-url / --usd-rate-pointer (payments.usd-rate): usdrate: outbound: address is not public"},
		{[]string{"--usd-rate-url", "https://rates.example/", "--usd-rate-pointer", "data"}, "not a JSON pointer"},
		{[]string{"--usd-rate-url", "https://rates.example/", "--usd-rate-ttl", "0s"}, "--usd-rate-ttl 0s: want a positive duration"},
		{[]string{"--usd-rate-tolerance", "150"}, "--usd-rate-tolerance 150 (payments.usd-rate.tolerance): want a percentage from 0 to 100"},
	} {
		if code, _, errOut := c.run(append(base, tc.extra...)...); code != exitLocal || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: code %d, %q; want 2 and %q", tc.extra, code, errOut, tc.want)
		}
	}
	c.writeConfig("[payments.usd-rate]\npointer = \"/data/amount\"\n")
	if code, _, errOut := c.run(base...); code != exitLocal || !strings.Contains(errOut, "without --usd-rate-url (payments.usd-rate.url)") {
		t.Errorf("a pointer in the config alone: code %d, %q", code, errOut)
	}
}
