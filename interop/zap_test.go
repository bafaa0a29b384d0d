package interop

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// startZapSim runs cvm wallet-sim with srv=0 and alice=100, serving their
// Lightning addresses (NIP-57) on loopback HTTPS.
func startZapSim(t *testing.T, relayURL string) walletSim {
	t.Helper()
	sim := startWalletSim(t, relayURL, "srv=0", "alice=100", "--lnaddr=127.0.0.1:0", "--ca-file="+filepath.Join(t.TempDir(), "ca.pem"))
	if !strings.HasPrefix(sim.Addresses["srv"], "srv@127.0.0.1:") || sim.CAFile == "" {
		t.Fatalf("wallet-sim --lnaddr ready line: %+v", sim)
	}
	return sim
}

// TestPay_ZapCvmCallPaysReferenceServer: the reference server charges
// through its LnBolt11ZapPaymentProcessor, on a Lightning address of cvm
// wallet-sim (Node trusts the simulator's throw-away CA), its receipts read
// on the test's relay; cvm call pays the zap invoice from another wallet
// of the simulator over NWC, as any BOLT11 invoice, the reference showing
// no zap request to check. The call returns and exactly the price moved.
func TestPay_ZapCvmCallPaysReferenceServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startZapSim(t, r.URL)
	pub := startTSServer(t, r.URL, "optional", "optional", map[string]string{
		"PRICE_ADD": "10", "ZAP_ADDRESS": sim.Addresses["srv"], "NODE_EXTRA_CA_CERTS": sim.CAFile,
	})
	home, alice := t.TempDir(), walletFile(t, sim.Wallets["alice"])

	code, out, errOut := cvm(t, home, "--json", "call", pub, "add", "a=1", "b=2", "--relay", r.URL, "--wallet-file", alice,
		"--max-sats", "10", "--yes", "--log-level", "info")
	var called paidCall
	if code != 0 || json.Unmarshal([]byte(out), &called) != nil || called.StructuredContent["sum"] != 3 {
		t.Fatalf("cvm call paying the reference server's zap: %d %s %s", code, out, errOut)
	}
	if ps := called.Meta["cvm/payments"]; len(ps) != 1 || ps[0].Amount != 10 || ps[0].PMI != payments.PMILightningBolt11 || !ps[0].Accepted {
		t.Errorf("payments reported: %+v", ps)
	}
	if !strings.Contains(errOut, "without its zap request to check") {
		t.Errorf("the skipped check of the zap request is not logged: %s", errOut)
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})
}

// TestPay_ZapReferenceClientPaysGatewayZapAddress: cvm gateway
// --zap-address charges with only a Lightning address of cvm wallet-sim
// (the fetcher trusting its CA and port through the test-only variables);
// the reference client (its NWC handler) is asked for the zap invoice in
// payment_required, with the zap request in _meta, pays it, is told
// payment_accepted once the gateway read the zap receipt, and gets the
// result; exactly the price moved.
func TestPay_ZapReferenceClientPaysGatewayZapAddress(t *testing.T) {
	server := everything(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startZapSim(t, r.URL)
	host := strings.TrimPrefix(sim.Addresses["srv"], "srv@")
	gw := startGatewayEnv(t, []string{outboundtest.EnvAllow + "=" + host, outboundtest.EnvCA + "=" + sim.CAFile},
		"--relay", r.URL, "--price", "tool:get-sum=10", "--zap-address", sim.Addresses["srv"], "--log-level", "debug", "--", "node", server)

	res := referenceClientGetsSum(t, r.URL, gw, sim.Wallets["alice"])
	req, n := res.notification(contextvm.MethodPaymentRequired)
	meta, _ := req.Params["_meta"].(map[string]any)
	if n != 1 || req.Params["amount"] != float64(10) || req.Params["pmi"] != payments.PMILightningBolt11 ||
		!strings.HasPrefix(req.Params["pay_req"].(string), "lnbcrt100n1") || meta["rail"] != "nip57" || meta["zap_request"] == nil {
		t.Errorf("payment_required seen by the reference client (%d): %+v", n, req.Params)
	}
	if _, n := res.notification(contextvm.MethodPaymentAccepted); n != 1 {
		t.Errorf("payment_accepted seen %d times", n)
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if err := gw.stderr.WaitFor(ctx, "payment settled by its zap receipt"); err != nil {
		t.Error(err)
	}
}
