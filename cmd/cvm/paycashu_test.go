package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// cashuWorld is a relay, cvm wallet-sim (the mint's wallet, alice's and
// srv's), cvm mint-sim, alice's Cashu wallet holding 100 sats minted there
// (cvm cashu mint) and a cvm gateway charging 10 sats for add (or 0.005
// usd at 50 000 usd a bitcoin, when usd) that takes Cashu of the mint
// (--cashu-mint), or of another one when foreign.
type cashuWorld struct {
	relay, mint, npub string
	pubkey            string // the gateway's, in hex
	sim               walletSimReady
	rate              *rateEndpoint // the usd rate source, when usd
	aliceWallet       string
	gatewayData       string
	c                 *cli
	mintSim           *proc
	mintArgs          []string // what restartMint runs mint-sim with
	gateway           *proc
	gatewayArgs       []string // what restartGateway runs cvm with
}

// cashuWorldOptions shape a cashuWorld; the zero value is alice holding
// 100 sats of the mint the gateway takes.
type cashuWorldOptions struct {
	foreign   bool   // the gateway takes another mint's ecash
	aliceSats string // what alice mints (default 100)
	// usd prices add at 0.005 usd, converted by the gateway at the rate
	// of w.rate (50 000 usd a bitcoin: 10 sats), which the cvm processes
	// may fetch.
	usd bool
}

func newCashuWorld(t *testing.T, o cashuWorldOptions) *cashuWorld {
	t.Helper()
	if o.aliceSats == "" {
		o.aliceSats = "100"
	}
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	w := &cashuWorld{relay: r.URL, c: newCLI(t), gatewayData: t.TempDir()}
	dir := t.TempDir()
	_, w.sim = startWalletSim(t, w.c, "--relay", r.URL, "--wallet", "mint=0", "--wallet", "alice=1000", "--wallet", "srv=0", "--out", dir)
	w.mintArgs = []string{"--data", t.TempDir(), "--wallet-file", filepath.Join(dir, "mint.wallet")}
	var ready mintSimReady
	w.mintSim, ready = startMintSim(t, w.c, w.mintArgs...)
	w.mint = ready.URL
	w.mintArgs = append(w.mintArgs, "--listen", strings.TrimPrefix(ready.URL, "http://"))
	w.aliceWallet = filepath.Join(dir, "alice.wallet")
	if code, _, errOut := w.c.run("cashu", "mint", "--mint", w.mint, "--wallet-file", w.aliceWallet, "--max-sats", o.aliceSats, o.aliceSats); code != 0 {
		t.Fatalf("cvm cashu mint: %d %s", code, errOut)
	}
	accepted := w.mint
	if o.foreign { // the same mint under another name: not the one alice's tokens name
		accepted = strings.Replace(w.mint, "127.0.0.1", "localhost", 1)
	}
	price := []string{"--price", "tool:add=10"}
	if o.usd {
		w.rate = newRateEndpoint(t, "50000")
		w.c.env["CVM_TEST_OUTBOUND_ALLOW"] = w.rate.Listener.Addr().String()
		price = append([]string{"--price", "tool:add=0.005:usd"}, w.rate.flags()...)
	}
	w.gatewayArgs = append([]string{"gateway", "--relay", r.URL, "--cashu-mint", accepted, "--data", w.gatewayData}, price...)
	w.gatewayArgs = append(w.gatewayArgs, "--", demoServer(t))
	w.startGateway(t)
	return w
}

// startGateway runs the gateway on w's data.
func (w *cashuWorld) startGateway(t *testing.T) {
	t.Helper()
	w.gateway = startCVM(t, w.c, w.gatewayArgs...)
	var gr gatewayReady
	w.gateway.ReadyLine(t, &gr)
	w.npub, w.pubkey = gr.Npub, gr.Pubkey
}

// restartMint runs mint-sim again on the same data and address, after
// the test stopped it.
func (w *cashuWorld) restartMint(t *testing.T) {
	t.Helper()
	w.mintSim, _ = startMintSim(t, w.c, w.mintArgs...)
}

// held is what alice's Cashu wallet and the gateway's hold at the mint.
func (w *cashuWorld) held(t *testing.T) (alice, srv uint64) {
	t.Helper()
	for _, x := range []struct {
		dir string
		n   *uint64
	}{{filepath.Join(w.c.env["XDG_DATA_HOME"], "cvm", "cashu"), &alice}, {filepath.Join(w.gatewayData, "cashu"), &srv}} {
		bs, err := cashuwallet.New(cashuwallet.Options{Dir: x.dir}).Balance()
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			*x.n += b.Sats
		}
	}
	return alice, srv
}

// call is cvm call add with --cashu, decoded; it fails t unless
// the sum comes back.
func (w *cashuWorld) call(t *testing.T) []payment {
	t.Helper()
	code, out, errOut := w.c.run("--json", "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--cashu", "--max-sats", "10", "--yes")
	var res struct {
		StructuredContent map[string]float64   `json:"structuredContent"`
		Meta              map[string][]payment `json:"_meta"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.StructuredContent["sum"] != 3 {
		t.Fatalf("cvm call --cashu: code %d, %s, %s", code, out, errOut)
	}
	return res.Meta["cvm/payments"]
}

// A gateway taking only Cashu (--cashu-mint, no Lightning wallet) charges:
// cvm call --cashu pays from alice's Cashu wallet, exactly the price moves
// from it to the gateway's, and each call is paid once; alice's Lightning
// wallet pays nothing. The first call knows the price from tools/list and
// pays in the request; the second (payments.cashu in the config) types its
// arguments from the cache, so it learns the price from payment_required,
// whose NUT-18 request (creqA) it pays by sending the request again.
func TestPayCLI_CashuDirect(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	before := balanceOf(t, w.sim.Wallets["alice"])
	ps := w.call(t)
	if len(ps) != 1 || ps[0].Amount != 10 || ps[0].PMI != cashuwallet.PMIDirect {
		t.Fatalf("payments reported: %+v", ps)
	}
	if a, s := w.held(t); a != 90 || s != 10 {
		t.Fatalf("after one call: alice holds %d, the gateway %d; want 90 and 10", a, s)
	}
	w.c.writeConfig("[payments]\ncashu = true\nmax-sats = 10\n")
	code, out, errOut := w.c.run("--json", "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--yes")
	if code != 0 || !strings.Contains(out, `"sum":3`) {
		t.Fatalf("call with payments.cashu: %d %s %s", code, out, errOut)
	}
	if a, s := w.held(t); a != 80 || s != 20 {
		t.Fatalf("after two calls: alice holds %d, the gateway %d; want 80 and 20", a, s)
	}
	if after := balanceOf(t, w.sim.Wallets["alice"]); after != before {
		t.Fatalf("alice's Lightning wallet went from %d to %d msat", before, after)
	}
}

// A gateway that takes another mint's ecash rejects alice's token without
// consuming it (payment_rejected): it goes back to her wallet, and the
// payment request that follows names a mint she holds nothing at, so the
// call is refused with a message that says so; nothing moves.
func TestPayCLI_CashuForeignMintRefused(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{foreign: true})
	code, out, errOut := w.c.run("call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--cashu", "--max-sats", "10", "--yes")
	if code != exitPayment || !strings.Contains(errOut, "rejected") || !strings.Contains(errOut, "not accepted") || !strings.Contains(errOut, "not paid") {
		t.Fatalf("a call paid in a foreign mint's ecash: %d %s %s", code, out, errOut)
	}
	if a, s := w.held(t); a != 100 || s != 0 {
		t.Fatalf("after the refusal: alice holds %d, the gateway %d; want 100 and 0", a, s)
	}
}

// cvm proxy --cashu pays the same way for its host: each call moves
// exactly the price from alice's Cashu wallet to the gateway's.
func TestPayProxy_CashuDirect(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	cs := hostOver(t, w.c, nil, "proxy", w.npub, "--relay", w.relay, "--cashu", "--max-sats", "10")
	for range 2 {
		if res, err := addOverProxy(t, cs); err != nil || res.IsError {
			t.Fatalf("a call over cvm proxy --cashu: %v %+v", err, res)
		}
	}
	if a, s := w.held(t); a != 80 || s != 20 {
		t.Fatalf("after two calls over the proxy: alice holds %d, the gateway %d; want 80 and 20", a, s)
	}
}
