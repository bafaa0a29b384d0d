package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// payWorld is a relay, a fake ledger shared by files, and a cvm gateway
// charging 10 sats for the demo server's add tool, paid to "srv".
type payWorld struct {
	relay      string
	ledger     *payments.Ledger
	npub       string
	clientFile string // the client's wallet file: fake://alice
	gateway    *proc
}

func writeSecret(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newPayWorld(t *testing.T, price string) *payWorld {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.json")
	w := &payWorld{relay: r.URL, ledger: payments.OpenLedger(ledgerPath)}
	if err := w.ledger.Fund(context.Background(), "alice", 100); err != nil {
		t.Fatal(err)
	}
	srvWallet := writeSecret(t, dir, "srv.wallet", "fake://srv?ledger="+ledgerPath)
	w.clientFile = writeSecret(t, dir, "alice.wallet", "fake://alice?ledger="+ledgerPath)
	w.gateway = startCVM(t, newCLI(t), "gateway", "--relay", r.URL, "--price", price, "--wallet-file", srvWallet, "--", demoServer(t))
	var ready gatewayReady
	w.gateway.ReadyLine(t, &ready)
	w.npub = ready.Npub
	return w
}

func (w *payWorld) balances(t *testing.T) (alice, srv int64) {
	t.Helper()
	alice, _ = w.ledger.Balance(context.Background(), "alice")
	srv, _ = w.ledger.Balance(context.Background(), "srv")
	return alice, srv
}

func TestPayCLI_CallPaysWithinTheCapAndReports(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	c := newCLI(t)
	code, out, errOut := c.run("call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.clientFile, "--max-sats", "10", "--yes")
	if code != 0 || out != `{"sum":3}`+"\n" || !strings.Contains(errOut, "paid 10 sats to "+w.npub+" for tool:add") {
		t.Fatalf("paid call: code %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = c.run("--json", "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.clientFile, "--max-sats", "10", "--yes")
	var res struct {
		Meta map[string][]payment `json:"_meta"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Meta["cvm/payments"]) != 1 {
		t.Fatalf("--json: code %d, %q, %q", code, out, errOut)
	}
	if p := res.Meta["cvm/payments"][0]; p.Amount != 10 || p.Unit != "sats" || p.What != "tool:add" || p.Server != w.npub || !p.Accepted {
		t.Fatalf("--json payment %+v", p)
	}
	if a, s := w.balances(t); a != 80 || s != 20 {
		t.Fatalf("balances alice %d srv %d; want 80 and 20", a, s)
	}
}

func TestPayCLI_RefusesWithoutCapTerminalOrBudget(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	c := newCLI(t)
	base := []string{"call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.clientFile}
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"no cap", []string{"--yes"}, "costs 10 sats and no per-call cap allows paying it; give --max-sats 10 (or set payments.max-sats) to pay it with your wallet"},
		{"over the cap", []string{"--max-sats", "9", "--yes"}, "raise --max-sats"},
		{"no terminal, no --yes", []string{"--max-sats", "10"}, "--yes"},
		{"not allowed", []string{"--max-sats", "10", "--yes", "--pay-allow", strings.Repeat("ab", 32)}, "payments.allow"},
	} {
		code, _, errOut := c.run(append(base, tc.extra...)...)
		if code != exitPayment || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: code %d, stderr %q; want 5 and %q", tc.name, code, errOut, tc.want)
		}
	}
	// The wallet was given: the advice names only the cap. Without one,
	// it names both.
	if _, _, errOut := c.run(append(base, "--yes")...); strings.Contains(errOut, "--wallet-file") {
		t.Errorf("no cap, with a wallet: %q asks for a wallet", errOut)
	}
	noWallet := []string{"call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--yes"}
	if code, _, errOut := c.run(noWallet...); code != exitPayment || !strings.Contains(errOut, "give --max-sats 10 (or set payments.max-sats) and a wallet (--wallet-file or $CVM_WALLET)") {
		t.Errorf("no cap, no wallet: code %d, %q", code, errOut)
	}
	if a, s := w.balances(t); a != 100 || s != 0 {
		t.Fatalf("balances alice %d srv %d after refusals", a, s)
	}
}

// A negative limit, from a flag, the config file or the environment, is
// refused before anything is sent, saying which; a malformed one too. A
// negative cap used to read as no cap, and a negative daily limit as none
// at all, which paid.
func TestPayCLI_RefusesBadLimitsBeforeSending(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	for _, tc := range []struct {
		name   string
		args   []string
		config string
		env    map[string]string
		want   string
	}{
		{"cap", []string{"--max-sats", "-5"}, "", nil, "--max-sats -5 (or payments.max-sats): a limit cannot be negative; give the most to pay in sats (0, the default, pays nothing)"},
		{"daily", []string{"--max-sats", "10", "--max-sats-per-day", "-5"}, "", nil, "--max-sats-per-day -5 (or payments.max-sats-per-day): a limit cannot be negative"},
		{"daily per server", []string{"--max-sats", "10", "--max-sats-per-server-per-day", "-1"}, "", nil, "--max-sats-per-server-per-day -1 (or payments.max-sats-per-server-per-day): a limit cannot be negative"},
		{"config", nil, "[payments]\nmax-sats = 10\nmax-sats-per-day = -5\n", nil, "--max-sats-per-day -5 (or payments.max-sats-per-day): a limit cannot be negative"},
		{"environment", []string{"--max-sats", "10"}, "", map[string]string{"CVM_PAYMENTS_MAX_SATS_PER_SERVER_PER_DAY": "-3"}, "-3 (or payments.max-sats-per-server-per-day): a limit cannot be negative"},
		{"malformed flag", []string{"--max-sats", "ten"}, "", nil, `invalid argument "ten" for "--max-sats" flag`},
		{"malformed config", nil, "[payments]\nmax-sats = \"ten\"\n", nil, `key "payments.max-sats": invalid value "ten" for int64`},
		{"malformed environment", []string{"--max-sats", "10"}, "", map[string]string{"CVM_PAYMENTS_MAX_SATS_PER_DAY": "lots"}, `CVM_PAYMENTS_MAX_SATS_PER_DAY: invalid value "lots" for int64`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			if tc.config != "" {
				c.writeConfig(tc.config)
			}
			maps.Copy(c.env, tc.env)
			// Through the world's relay, and through none: the refusal
			// comes first either way.
			for _, relayURL := range []string{w.relay, "ws://127.0.0.1:1"} {
				args := append([]string{"call", w.npub, "add", "a=1", "b=2", "--relay", relayURL, "--wallet-file", w.clientFile, "--yes"}, tc.args...)
				code, out, errOut := c.run(args...)
				if code != exitLocal || out != "" || !strings.Contains(errOut, tc.want) {
					t.Errorf("%v: code %d, %q, %q; want 2 and %q", args, code, out, errOut, tc.want)
				}
			}
		})
	}
	if a, s := w.balances(t); a != 100 || s != 0 {
		t.Fatalf("balances alice %d srv %d after refusals", a, s)
	}
	// The other commands that pay.
	c := newCLI(t)
	for _, args := range [][]string{
		{"proxy", w.npub, "--relay", "ws://127.0.0.1:1", "--max-sats", "-5"},
		{"discover", "--relay", "ws://127.0.0.1:1", "--max-sats", "10", "--max-sats-per-day", "-5"},
		{"discover", "--relay", "ws://127.0.0.1:1", "--max-price", "NaN"},
	} {
		code, out, errOut := c.run(args...)
		if code != exitLocal || out != "" || !(strings.Contains(errOut, "a limit cannot be negative") || strings.Contains(errOut, "want a price of 0 or more")) {
			t.Errorf("%v: code %d, %q, %q", args, code, out, errOut)
		}
	}
}

func TestPayCLI_WalletSecrets(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	open := filepath.Join(dir, "open.wallet")
	os.WriteFile(open, []byte("fake://a?ledger=/x"), 0o644)
	if code, _, errOut := c.run("call", strings.Repeat("ab", 32), "add", "--wallet-file", open, "--max-sats", "1"); code != exitLocal || !strings.Contains(errOut, "--wallet-file") {
		t.Errorf("a wallet file others can read: code %d, %q", code, errOut)
	}
	const secret = "deadbeefcafef00d" // too short: the URI is refused, without showing it
	nwc := writeSecret(t, dir, "nwc.wallet", "nostr+walletconnect://"+strings.Repeat("cd", 32)+"?relay=ws://x&secret="+secret)
	code, out, errOut := c.run("call", strings.Repeat("ab", 32), "add", "--wallet-file", nwc, "--max-sats", "1")
	if code != exitLocal || !strings.Contains(errOut, "wallet") || strings.Contains(out+errOut, secret) {
		t.Errorf("a malformed NWC wallet: code %d, %q", code, errOut)
	}
	c.env[walletEnv] = "nostr+walletconnect://x?secret=" + secret
	if code, out, errOut := c.run("config"); code != 0 || strings.Contains(out+errOut, secret) || !strings.Contains(out, "CVM_WALLET") {
		t.Errorf("cvm config with $CVM_WALLET: %d %q %q", code, out, errOut)
	}
}

// Explicit gating keys a payment on the invocation (client key, tool,
// arguments): a cvm call that declines to pay leaves its payment request
// open, and the next cvm call with the same identity and arguments is
// offered it again, pays it and gets its result, instead of -32043 with
// nothing to pay until it expires.
func TestPayCLI_ExplicitNextProcessPaysTheSameInvocation(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	c := newCLI(t)
	key := filepath.Join(t.TempDir(), "key")
	if code, _, errOut := c.run("keygen", "--out", key); code != 0 {
		t.Fatal(errOut)
	}
	base := []string{"call", w.npub, "add", "a=1", "b=2", "--key", key, "--relay", w.relay, "--wallet-file", w.clientFile, "--payment-interaction", "explicit", "--yes"}
	if code, _, errOut := c.run(append(base, "--max-sats", "5")...); code != exitPayment || !strings.Contains(errOut, "--max-sats") {
		t.Fatalf("over the cap: code %d, %q", code, errOut)
	}
	if code, out, errOut := c.run(append(base, "--max-sats", "10")...); code != 0 || out != `{"sum":3}`+"\n" {
		t.Fatalf("the next process: code %d, %q, %q", code, out, errOut)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("balances alice %d srv %d; want 90 and 10", a, s)
	}
}

// Two cvm call processes at once, sharing one daily budget that holds one
// call: one pays, the other is refused, and no more than the limit is
// spent.
func TestPayCLI_ConcurrentCallsShareTheDailyBudget(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	c := newCLI(t)
	c.writeConfig("[payments]\nmax-sats = 10\nmax-sats-per-day = 15\n")
	var procs []*proc
	for range 2 {
		procs = append(procs, startCVM(t, c, "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.clientFile, "--yes"))
	}
	ok, refused := 0, 0
	for _, p := range procs {
		switch code := p.Wait(t); {
		case code == 0:
			ok++
		case code == exitPayment && strings.Contains(p.Stderr.String(), "daily limit"):
			refused++
		default:
			t.Errorf("exit %d: %s", code, p.Stderr)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d paid, %d refused; want 1 and 1", ok, refused)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("balances alice %d srv %d; want 90 and 10", a, s)
	}
}

// simWorld is a relay, cvm wallet-sim serving the wallets srv (0 sats) and
// alice (100), and a cvm gateway charging 10 sats for the demo server's add,
// paid into srv.
type simWorld struct {
	relay   string
	sim     walletSimReady
	alice   string // alice's wallet file
	gateway *proc
	ready   gatewayReady
}

// newSimWorld starts a simWorld; gatewayFlags go to the gateway.
func newSimWorld(t *testing.T, c *cli, gatewayFlags ...string) *simWorld {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	_, sim := startWalletSim(t, c, "--relay", r.URL, "--wallet", "srv=0", "--wallet", "alice=100")
	dir := t.TempDir()
	srvWallet := writeSecret(t, dir, "srv.wallet", sim.Wallets["srv"])
	w := &simWorld{relay: r.URL, sim: sim, alice: writeSecret(t, dir, "alice.wallet", sim.Wallets["alice"])}
	args := append([]string{"gateway", "--relay", r.URL, "--price", "tool:add=10", "--wallet-file", srvWallet}, gatewayFlags...)
	w.gateway = startCVM(t, c, append(args, "--", demoServer(t))...)
	w.gateway.ReadyLine(t, &w.ready)
	return w
}

// Lightning end to end: cvm wallet-sim serves two wallets over Nostr Wallet
// Connect; cvm gateway collects 10 sats for add into one, cvm call pays from
// the other, and the balances move by exactly the price.
func TestPayCLI_LightningThroughWalletSim(t *testing.T) {
	c := newCLI(t)
	w := newSimWorld(t, c)
	sim, ready, aliceWallet := w.sim, w.ready, w.alice

	code, out, errOut := c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", aliceWallet, "--max-sats", "20", "--yes", "--json")
	var res struct {
		StructuredContent map[string]float64 `json:"structuredContent"`
		Meta              map[string][]struct {
			Amount   int64  `json:"amount"`
			PMI      string `json:"pmi"`
			Accepted bool   `json:"accepted"`
		} `json:"_meta"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.StructuredContent["sum"] != 3 {
		t.Fatalf("paid call: code %d, %s, %s", code, out, errOut)
	}
	if ps := res.Meta["cvm/payments"]; len(ps) != 1 || ps[0].Amount != 10 || ps[0].PMI != payments.PMILightningBolt11 || !ps[0].Accepted {
		t.Errorf("payments reported: %+v", ps)
	}
	if a, s := balanceOf(t, sim.Wallets["alice"]), balanceOf(t, sim.Wallets["srv"]); a != 90_000 || s != 10_000 {
		t.Fatalf("balances after one paid call: alice %d msat, srv %d msat; want 90000 and 10000", a, s)
	}
	// Over the cap: refused before paying, nothing moves.
	code, _, errOut = c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", aliceWallet, "--max-sats", "5", "--yes")
	if code != exitPayment || !strings.Contains(errOut, "--max-sats") {
		t.Errorf("over the cap: code %d, %s", code, errOut)
	}
	if a, s := balanceOf(t, sim.Wallets["alice"]), balanceOf(t, sim.Wallets["srv"]); a != 90_000 || s != 10_000 {
		t.Fatalf("balances after a refused call: alice %d msat, srv %d msat", a, s)
	}
}
