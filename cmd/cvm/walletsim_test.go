package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

type walletSimReady struct {
	Ready     bool              `json:"ready"`
	Relays    []string          `json:"relays"`
	Wallets   map[string]string `json:"wallets"`
	Simulator bool              `json:"simulator"`
	Note      string            `json:"note"`
}

func startWalletSim(t *testing.T, c *cli, args ...string) (*proc, walletSimReady) {
	t.Helper()
	p := startCVM(t, c, append([]string{"wallet-sim"}, args...)...)
	var ready walletSimReady
	p.ReadyLine(t, &ready)
	if !ready.Ready || !ready.Simulator || !strings.Contains(ready.Note, "never real money") {
		t.Fatalf("ready line %+v", ready)
	}
	return p, ready
}

func balanceOf(t *testing.T, uri string) int64 {
	t.Helper()
	u, err := nwc.ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	c := nwc.NewClient(u, nwc.ClientOptions{Timeout: 10 * time.Second})
	defer c.Close()
	b, err := c.GetBalance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWalletSim starts the binary on a relay, reads its ready line, uses
// the printed URIs with the NWC client (balances, a payment between the
// two wallets), stops it with SIGTERM, and restarts it on the same --data:
// the same URIs and the balances after the payment come back.
func TestWalletSim(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	data := t.TempDir()
	p, ready := startWalletSim(t, c, "--relay", r.URL, "--wallet", "alice=1000", "--wallet", "bob=0", "--data", data)
	if len(ready.Wallets) != 2 || len(ready.Relays) != 1 {
		t.Fatalf("ready line %+v", ready)
	}
	if got := balanceOf(t, ready.Wallets["alice"]); got != 1_000_000 {
		t.Fatalf("alice has %d msat", got)
	}

	ctx := context.Background()
	ua, _ := nwc.ParseURI(ready.Wallets["alice"])
	ub, _ := nwc.ParseURI(ready.Wallets["bob"])
	alice := nwc.NewClient(ua, nwc.ClientOptions{})
	defer alice.Close()
	bob := nwc.NewClient(ub, nwc.ClientOptions{})
	defer bob.Close()
	inv, err := bob.MakeInvoice(ctx, 250_000, "wallet-sim test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.PayInvoice(ctx, inv.Bolt11); err != nil {
		t.Fatal(err)
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, p.Stderr)
	}
	if strings.Contains(p.Stderr.String(), ua.Secret().Hex()) {
		t.Fatal("a secret reached the logs")
	}

	_, again := startWalletSim(t, c, "--relay", r.URL, "--wallet", "alice=1000", "--wallet", "bob=0", "--data", data)
	if again.Wallets["alice"] != ready.Wallets["alice"] || again.Wallets["bob"] != ready.Wallets["bob"] {
		t.Fatal("URIs changed across a restart with --data")
	}
	if a, b := balanceOf(t, again.Wallets["alice"]), balanceOf(t, again.Wallets["bob"]); a != 750_000 || b != 250_000 {
		t.Fatalf("balances after restart: %d %d", a, b)
	}
}

// TestWalletSimUsage: missing or malformed flags exit 2 with a message
// naming the flag.
func TestWalletSimUsage(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"wallet-sim", "--wallet", "a=1"}, "--relay"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1"}, "--wallet"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a"}, "NAME=SATS"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=-1"}, "a balance cannot be negative"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=-99999999999999999999"}, "a balance cannot be negative"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=2100000000000001"}, "more sats than there will ever be"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=99999999999999999999"}, "more sats than there will ever be"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=1.5"}, `"1.5" is not a whole number of sats`},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "=5"}, "NAME=SATS"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=1", "--wallet", "a=2"}, "twice"},
		{[]string{"wallet-sim", "--relay", "ws://127.0.0.1:1", "--wallet", "a=1", "--encryption", "nip44"}, "want nip44_v2 or nip04"},
	} {
		code, _, stderr := c.run(tc.args...)
		if code != exitLocal || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr)
		}
	}
}

// TestWalletSim_URIsCopyAsPrinted: the ready line holds the URIs as a
// person copies them (& as &, not \u0026), and --out writes each to a 0600
// file named in the ready line, which --wallet-file reads as it is.
func TestWalletSim_URIsCopyAsPrinted(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	out := filepath.Join(t.TempDir(), "wallets")
	p := startCVM(t, c, "wallet-sim", "--relay", r.URL, "--wallet", "alice=7", "--wallet", "bob-2=0", "--out", out)
	var raw json.RawMessage // the line as printed
	p.ReadyLine(t, &raw)
	line := string(raw)
	if strings.Contains(line, `\u0026`) || !strings.Contains(line, "&secret=") {
		t.Fatalf("the ready line escapes the URIs: %s", line)
	}
	var ready struct {
		Wallets map[string]string `json:"wallets"`
		Files   map[string]string `json:"files"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice", "bob-2"} {
		want := filepath.Join(out, name+".wallet")
		if ready.Files[name] != want {
			t.Fatalf("files %v: want %s for %s", ready.Files, want, name)
		}
		info, err := os.Stat(want)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", want, err, info.Mode())
		}
		b, _ := os.ReadFile(want)
		if strings.TrimSpace(string(b)) != ready.Wallets[name] {
			t.Fatalf("%s holds %q, the ready line %q", want, b, ready.Wallets[name])
		}
	}
	// The file works as it is, where a wallet file is taken.
	a := newCLI(t)
	code, _, errOut := a.run("call", nostrx.EncodeNpub(nostr.Generate().Public()), "add", "a=1", "--relay", "ws://127.0.0.1:1", "--timeout", "1s",
		"--wallet-file", ready.Files["alice"], "--max-sats", "1", "--yes")
	if strings.Contains(errOut, "wallet") {
		t.Fatalf("the written wallet file is refused: code %d, %s", code, errOut)
	}
	if got := balanceOf(t, ready.Wallets["alice"]); got != 7_000 {
		t.Fatalf("alice has %d msat", got)
	}
	// A name that is no plain file name is refused with --out.
	if code, _, errOut := c.run("wallet-sim", "--relay", r.URL, "--wallet", "../x=1", "--out", out); code != exitLocal || !strings.Contains(errOut, "a wallet name becomes a file name") {
		t.Fatalf("--wallet ../x with --out: code %d, %s", code, errOut)
	}
}

// TestWalletURI_SaysWhyTheSecretIsMissing: a connection URI cut at its
// '&' by a shell, or copied with & escaped as \u0026, is refused with the
// likely cause and what to do, and without the secret.
func TestWalletURI_SaysWhyTheSecretIsMissing(t *testing.T) {
	secret := strings.Repeat("ab", 32)
	full := "nostr+walletconnect://" + nostr.Generate().Public().Hex() + "?relay=ws%3A%2F%2F127.0.0.1%3A7777&secret=" + secret
	cut, _, _ := strings.Cut(full, "&")
	for _, tc := range []struct{ name, uri, want string }{
		{"cut by the shell", cut, "was it cut at an '&' by the shell? quote it"},
		{"escaped as in JSON", strings.Replace(full, "&", `\u0026`, 1), `has \u0026 where '&' belongs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.env[walletEnv] = tc.uri
			code, _, errOut := c.run("call", nostrx.EncodeNpub(nostr.Generate().Public()), "add", "--relay", "ws://127.0.0.1:1", "--max-sats", "1", "--yes")
			if code != exitLocal || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "wallet-sim --out") {
				t.Fatalf("code %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if strings.Contains(errOut, secret) {
				t.Fatal("the secret reached stderr")
			}
		})
	}
}
