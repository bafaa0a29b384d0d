package interop

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// TestPay_ReferenceClientPaysUSDPricedGateway: cvm gateway prices
// get-sum at 0.05 usd (its cap tag says so) and converts it at its rate
// source, a loopback endpoint saying 50 000 usd a bitcoin, into exactly
// 100 sats, which payment_required states and the invoice asks. The
// reference client (@contextvm/sdk 0.11.14, withClientPayments and its
// LnBolt11NwcPaymentHandler) reads neither the cap tag's unit nor the
// amount: it pays the invoice it is given (an app's paymentPolicy is
// where it could check). So it pays the 100 sats the server stated, and
// exactly those move.
func TestPay_ReferenceClientPaysUSDPricedGateway(t *testing.T) {
	server := everything(t)
	rates := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"bitcoin":{"usd":50000}}`)
	}))
	defer rates.Close()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0", "alice=1000")
	gw := startGatewayEnv(t, []string{"CVM_TEST_OUTBOUND_ALLOW=" + rates.Listener.Addr().String()},
		"--relay", r.URL, "--price", "tool:get-sum=0.05:usd", "--wallet-file", walletFile(t, sim.Wallets["srv"]),
		"--usd-rate-url", rates.URL, "--usd-rate-pointer", "/bitcoin/usd", "--", "node", server)

	referencePaysGetSum(t, r.URL, gw, sim.Wallets["alice"], 100, "lnbcrt1u1")
	wantBalances(t, sim, map[string]int64{"alice": 900_000, "srv": 100_000})
}
