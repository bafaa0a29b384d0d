package main

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// A gateway whose --zap-address cannot be paid by zap (its LNURL-pay
// endpoint has no allowsNostr, or redirects to a private address) refuses
// the priced call with an error saying nothing was charged, logs why, and
// never runs it; the caller's wallet is untouched.
func TestZapCLI_AddressThatCannotBeZappedIsRefusedBeforeAnyPayment(t *testing.T) {
	for name, c := range map[string]struct {
		h    http.HandlerFunc
		logs string
	}{
		"no allowsNostr": {func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"tag":"payRequest","callback":"https://127.0.0.1:1/cb","minSendable":1000,"maxSendable":1000000,"metadata":"[]","nostrPubkey":%q}`, nostr.Generate().Public().Hex())
		}, "allowsNostr"},
		"a redirect to a private address": {func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://10.0.0.1/.well-known/lnurlp/srv", http.StatusFound)
		}, "redirect not followed"},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			lnurl := httptest.NewTLSServer(c.h)
			t.Cleanup(lnurl.Close)
			host := strings.TrimPrefix(lnurl.URL, "https://")
			cli := newCLI(t)
			cli.env[outboundtest.EnvAllow] = host
			cli.env[outboundtest.EnvCA] = writeSecret(t, t.TempDir(), "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: lnurl.Certificate().Raw})))
			r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
			_, sim := startWalletSim(t, cli, "--relay", r.URL, "--wallet", "alice=100")
			alice := writeSecret(t, t.TempDir(), "alice.wallet", sim.Wallets["alice"])
			gw := startCVM(t, cli, "gateway", "--relay", r.URL, "--price", "tool:add=10", "--zap-address", "srv@"+host, "--", demoServer(t))
			var ready gatewayReady
			gw.ReadyLine(t, &ready)

			code, out, errOut := cli.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL, "--wallet-file", alice, "--max-sats", "10", "--yes")
			if code == 0 || !strings.Contains(errOut, "nothing was charged") {
				t.Errorf("a call priced in zaps to an address that cannot take them: exit %d, %s %s", code, out, errOut)
			}
			gw.Stderr.Await(t, 10*time.Second, "could not issue a payment request", c.logs)
			if b := balanceOf(t, sim.Wallets["alice"]); b != 100_000 {
				t.Errorf("alice holds %d msat; want 100000", b)
			}
		})
	}
}

// --zap-address takes a Lightning address, and is one way to collect:
// not with --wallet-file; wallet-sim's --lnaddr needs its --ca-file.
func TestZapCLI_FlagsSayWhatIsWrong(t *testing.T) {
	c := newCLI(t)
	r := relaytest.Start(t, relay.Options{})
	wallet := writeSecret(t, t.TempDir(), "w", "fake://srv?ledger="+filepath.Join(t.TempDir(), "l.json"))
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"gateway", "--relay", r.URL, "--zap-address", "not-an-address", "--", demoServer(t)}, "NAME@HOST"},
		{[]string{"gateway", "--relay", r.URL, "--zap-address", "srv@getalby.com", "--wallet-file", wallet, "--", demoServer(t)}, "give one"},
		{[]string{"wallet-sim", "--relay", r.URL, "--wallet", "a=1", "--lnaddr", "127.0.0.1:0"}, "--ca-file"},
	} {
		if code, _, errOut := c.run(tc.args...); code == 0 || !strings.Contains(errOut, tc.says) {
			t.Errorf("%q: exit %d, %s; want it to say %q", tc.args, code, errOut, tc.says)
		}
	}
	// The same address from the config file, payments.zap-address.
	c.writeConfig("[payments]\nzap-address = \"not-an-address\"\n")
	if code, _, errOut := c.run("gateway", "--relay", r.URL, "--", demoServer(t)); code == 0 || !strings.Contains(errOut, "--zap-address: zap: not a Lightning address") {
		t.Errorf("payments.zap-address from the config: exit %d, %s", code, errOut)
	}
}
