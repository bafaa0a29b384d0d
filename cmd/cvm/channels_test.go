package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// A Lightning wallet URI that parses; nothing is asked of it.
func unusedNWCURI() string {
	return "nostr+walletconnect://" + nostr.Generate().Public().Hex() + "?relay=ws://127.0.0.1:9&secret=" + nostr.Generate().Hex()
}

// --channel that could never be paid is refused before anything is sent,
// saying what to do: no wallet (or one that is no Lightning wallet), no
// --max-sats, a deposit above a daily limit, a negative one; closing a
// channel that is not there names the identity and how one opens.
func TestChannelCLI_RefusesWhatCannotBePaid(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	ln := writeSecret(t, dir, "ln.wallet", unusedNWCURI())
	fake := writeSecret(t, dir, "fake.wallet", "fake://me?ledger="+filepath.Join(dir, "ledger.json"))
	server := nostrx.EncodeNpub(nostr.Generate().Public())
	call := []string{"call", server, "add", "a=1", "--relay", "ws://127.0.0.1:9", "--yes"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--channel", "100", "--max-sats", "10"}, "needs a Lightning wallet"},
		{[]string{"--channel", "100", "--max-sats", "10", "--wallet-file", fake}, "needs a Lightning wallet"},
		{[]string{"--channel", "100", "--wallet-file", ln}, "needs --max-sats"},
		{[]string{"--channel", "100", "--max-sats", "10", "--wallet-file", ln, "--max-sats-per-day", "50"}, "more than --max-sats-per-day 50: the deposit counts against the daily limits"},
		{[]string{"--channel", "100", "--max-sats", "10", "--wallet-file", ln, "--max-sats-per-server-per-day", "99"}, "more than --max-sats-per-server-per-day 99"},
		{[]string{"--channel", "-5", "--max-sats", "10", "--wallet-file", ln}, "a deposit cannot be negative"},
	} {
		code, out, errOut := c.run(append(call, tc.args...)...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: code %d, stdout %q, stderr %s; want exit 2 saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
	c.writeConfig("[payments]\nchannel-deposit = 100\nmax-sats = 10\nmax-sats-per-day = 50\n")
	if code, _, errOut := c.run(append(call, "--wallet-file", ln)...); code != exitLocal || !strings.Contains(errOut, "payments.channel-deposit") || !strings.Contains(errOut, "daily limits") {
		t.Errorf("payments.channel-deposit over the daily limit: code %d, %s", code, errOut)
	}
	c.writeConfig("")

	if code, _, errOut := c.run("keygen"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := c.run("channels", "close", server, "--wallet-file", ln, "--relay", "ws://127.0.0.1:9")
	if code != exitLocal || out != "" || !strings.Contains(errOut, "you have no channel with "+server) || !strings.Contains(errOut, "cvm call --channel SATS") {
		t.Errorf("closing no channel: code %d, stdout %q, stderr %s", code, out, errOut)
	}
	if code, _, errOut := c.run("channels", "close", server, "--relay", "ws://127.0.0.1:9"); code != exitLocal || !strings.Contains(errOut, "needs your Lightning wallet") {
		t.Errorf("closing without a wallet: code %d, %s", code, errOut)
	}
	code, out, errOut = c.run("--json", "channels")
	var list struct{ Channels []channelRow }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Channels == nil || len(list.Channels) != 0 {
		t.Errorf("no channels, --json: code %d, %q, %s", code, out, errOut)
	}
	if code, out, _ := c.run("channels"); code != 0 || !strings.Contains(out, "no channels") {
		t.Errorf("no channels: code %d, %q", code, out)
	}
}

// A server that offers no channels is paid by invoice under --channel,
// and one line on stderr says so; the call is paid once, at its price.
func TestChannelCLI_ServerWithoutChannelsIsPaidByInvoice(t *testing.T) {
	w := newLNWorld(t)
	key := filepath.Join(t.TempDir(), "me.key")
	if code, _, errOut := w.c.run("keygen", "--out", key); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := w.c.run("call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.aliceWallet,
		"--max-sats", "10", "--yes", "--channel", "50", "--key", key)
	if code != 0 || !strings.Contains(out, `"sum":3`) {
		t.Fatalf("call: code %d, %q, %s", code, out, errOut)
	}
	if n := strings.Count(errOut, "offers no payment channels"); n != 1 {
		t.Fatalf("stderr says %d times that the server offers no channels; want once: %s", n, errOut)
	}
	if a, s := w.balances(t); a != 90_000 || s != 10_000 {
		t.Fatalf("alice %d msat, srv %d msat; want the price alone moved", a, s)
	}
}
