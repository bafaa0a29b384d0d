package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	w := newLNWorld(t, "--channels=false")
	key := newKeyFile(t, w.c)
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

// newKeyFile is a client key of its own (cvm keygen --out): a channel is
// its key's, and the gateway holds the default one.
func newKeyFile(t *testing.T, c *cli) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "me.key")
	if code, _, errOut := c.run("keygen", "--out", key); code != 0 {
		t.Fatal(errOut)
	}
	return key
}

// runCVM runs the cvm binary once with c's private HOME and XDG
// directories: a real process, as a person or a script runs it.
func runCVM(t *testing.T, c *cli, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: c.environ()}, args...)
}

// listChannelsJSON is cvm --json channels --key key, run as a process.
func listChannelsJSON(t *testing.T, c *cli, key string) []channelRow {
	t.Helper()
	code, out, errOut := runCVM(t, c, "--json", "channels", "--key", key)
	var list struct{ Channels []channelRow }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("cvm channels: code %d, %q, %s", code, out, errOut)
	}
	return list.Channels
}

// restartGateway stops the gateway and starts it again on its state.
func (w *lnWorld) restartGateway(t *testing.T) {
	t.Helper()
	if code := w.gateway.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("gateway exit %d: %s", code, w.gateway.Stderr)
	}
	w.gateway = startCVM(t, w.c, w.gatewayArgs...)
	var ready gatewayReady
	w.gateway.ReadyLine(t, &ready)
	if ready.Npub != w.npub {
		t.Fatalf("the gateway came back as %s, not %s", ready.Npub, w.npub)
	}
}

// A deposit above what is left of the day's limit is declined before it
// is paid, naming the deposit: the call does not run, nothing moves.
func TestChannelCLI_DepositAboveWhatIsLeftOfTheDay(t *testing.T) {
	w := newLNWorld(t)
	key := newKeyFile(t, w.c)
	args := []string{"call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.aliceWallet, "--max-sats", "10", "--yes", "--key", key, "--max-sats-per-day", "85"}
	if code, _, errOut := w.c.run(args...); code != 0 {
		t.Fatalf("a call by invoice: code %d, %s", code, errOut)
	}
	code, out, errOut := w.c.run(append(args, "--channel", "80")...)
	if code != exitPayment || out != "" || !strings.Contains(errOut, "the channel's deposit is 80 sats (--channel), more than is left of a daily limit") {
		t.Fatalf("an 80-sat deposit with 75 sats left today: code %d, %q, %s", code, out, errOut)
	}
	if a, s := w.balances(t); a != 90_000 || s != 10_000 {
		t.Fatalf("alice %d msat, srv %d msat; want the first call's price alone moved", a, s)
	}
}

// End to end through cvm wallet-sim, every cvm a process of its own: five
// cvm call --channel move alice's wallet once, by the deposit, though the
// gateway restarts between the second and the third; cvm channels shows
// the five prices spent; cvm channels close refunds all but them, to
// alice's wallet; closing again refunds nothing more.
func TestChannelCLI_FiveCallsOneDepositCloseRefundsTheRest(t *testing.T) {
	w := newLNWorld(t)
	w.gateway.Stderr.Await(t, 10*time.Second, "payment channels offered")
	key := newKeyFile(t, w.c)
	const deposit, price = 80, 10
	for i := 1; i <= 5; i++ {
		code, out, errOut := runCVM(t, w.c, "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.aliceWallet,
			"--max-sats", "10", "--yes", "--channel", strconv.Itoa(deposit), "--key", key)
		if code != 0 || !strings.Contains(out, `"sum":3`) {
			t.Fatalf("call %d: code %d, %q, %s", i, code, out, errOut)
		}
		if i == 1 && !strings.Contains(errOut, "paid 80 sats") || i > 1 && strings.Contains(errOut, "paid ") {
			a, s := w.balances(t)
			t.Fatalf("call %d reports: %s (alice %d srv %d)", i, errOut, a, s)
		}
		if a, s := w.balances(t); a != (100-deposit)*1000 || s != deposit*1000 {
			t.Fatalf("after call %d: alice %d msat, srv %d msat; want the deposit moved once", i, a, s)
		}
		if i == 2 {
			w.restartGateway(t)
		}
	}
	rows := listChannelsJSON(t, w.c, key)
	if len(rows) != 1 || rows[0].Server != w.npub || rows[0].Status != "open" || rows[0].Deposit != deposit*1000 ||
		rows[0].Spent != 5*price*1000 || rows[0].Unspent != (deposit-5*price)*1000 || rows[0].LastUse.IsZero() {
		t.Fatalf("cvm channels: %+v; want one open channel, 50 of 80 sats spent", rows)
	}
	if code, out, _ := runCVM(t, w.c, "channels", "--key", key); code != 0 || !strings.Contains(out, "open") || !strings.Contains(out, w.npub) {
		t.Fatalf("cvm channels: code %d, %q", code, out)
	}

	closeArgs := []string{"channels", "close", w.npub, "--relay", w.relay, "--wallet-file", w.aliceWallet, "--key", key}
	code, out, errOut := runCVM(t, w.c, closeArgs...)
	if code != 0 || !strings.Contains(out, "refunded 30 sats of channel "+rows[0].Channel) {
		t.Fatalf("close: code %d, %q, %s", code, out, errOut)
	}
	if a, s := w.balances(t); a != (100-5*price)*1000 || s != 5*price*1000 {
		t.Fatalf("after the close: alice %d msat, srv %d msat; want all but the five prices back", a, s)
	}
	code, out, errOut = runCVM(t, w.c, closeArgs...)
	if code != 0 || !strings.Contains(out, "nothing to refund") {
		t.Fatalf("closing again: code %d, %q, %s", code, out, errOut)
	}
	if a, s := w.balances(t); a != (100-5*price)*1000 || s != 5*price*1000 {
		t.Fatalf("after closing again: alice %d msat, srv %d msat; want nothing more moved", a, s)
	}
	if rows := listChannelsJSON(t, w.c, key); len(rows) != 1 || rows[0].Status != "refunded" {
		t.Fatalf("cvm channels after the close: %+v", rows)
	}
}

// A channel the gateway closed idle, with money left in it, is refunded
// on the client's next call: that call is refused on the old channel,
// opens another, and cvm claims what the old one owes, to alice's wallet;
// cvm channels shows the old one refunded and the new one open.
func TestChannelCLI_IdleClosedChannelRefundedOnTheNextCall(t *testing.T) {
	w := newLNWorld(t, "--channel-idle-ttl", "1s")
	key := newKeyFile(t, w.c)
	call := func() string {
		t.Helper()
		code, out, errOut := runCVM(t, w.c, "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.aliceWallet,
			"--max-sats", "10", "--yes", "--channel", "30", "--key", key)
		if code != 0 || !strings.Contains(out, `"sum":3`) {
			t.Fatalf("call: code %d, %q, %s", code, out, errOut)
		}
		return errOut
	}
	call()
	first := listChannelsJSON(t, w.c, key)
	if len(first) != 1 || first[0].Status != "open" {
		t.Fatalf("after the first call: %+v", first)
	}
	// Idleness is the behaviour under test: the channel's last use must
	// be more than the gateway's 1s TTL ago.
	testwait.Eventually(t, 10*time.Second, "the channel idle past the gateway's TTL", func() bool {
		return time.Since(first[0].LastUse) > 1200*time.Millisecond
	})
	if errOut := call(); !strings.Contains(errOut, "refunded 20 sats from channel "+first[0].Channel+", which the server closed") {
		t.Fatalf("the second call's stderr: %s", errOut)
	}
	if a, s := w.balances(t); a != 60_000 || s != 40_000 {
		t.Fatalf("alice %d msat, srv %d msat; want two deposits of 30 sats paid and 20 refunded", a, s)
	}
	rows := listChannelsJSON(t, w.c, key)
	if len(rows) != 2 || rows[0].Status != "open" || rows[0].Spent != 10_000 ||
		rows[1].Channel != first[0].Channel || rows[1].Status != "refunded" || rows[1].Unspent != 20_000 {
		t.Fatalf("cvm channels: %+v; want the new channel open and the old one refunded", rows)
	}
}

// cvm proxy with payments.channel-deposit in its config pays the host's
// calls over one channel: three calls, one Lightning payment (the
// deposit); once the proxy ends, cvm channels shows their prices spent.
func TestChannelCLI_ProxyPaysOverAChannel(t *testing.T) {
	w := newLNWorld(t)
	key := newKeyFile(t, w.c)
	w.c.writeConfig("[payments]\nchannel-deposit = 50\nmax-sats = 10\n")
	p := startCVM(t, w.c, "proxy", w.npub, "--relay", w.relay, "--wallet-file", w.aliceWallet, "--key", key)
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(p.Stdout), Writer: p.Stdin}, nil)
	if err != nil {
		t.Fatalf("connect to the proxy: %v; stderr: %s", err, p.Stderr)
	}
	for i := range 3 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v; stderr: %s", i+1, err, res, p.Stderr)
		}
		if a, s := w.balances(t); a != 50_000 || s != 50_000 {
			t.Fatalf("after call %d: alice %d msat, srv %d msat; want the deposit moved once", i+1, a, s)
		}
	}
	cs.Close()
	if code := p.Wait(t); code != 0 {
		t.Fatalf("proxy exit %d: %s", code, p.Stderr)
	}
	if rows := listChannelsJSON(t, w.c, key); len(rows) != 1 || rows[0].Status != "open" || rows[0].Spent != 30_000 || rows[0].Deposit != 50_000 {
		t.Fatalf("cvm channels: %+v; want 30 of 50 sats spent", rows)
	}
}

// cvm call --channel on an http:// server pays the same way: one deposit
// through the quotation flow, then calls paid by receipts in
// X-Payment-Channel-Data signed with the caller's DID key, across
// processes; the gateway offers the books of its Nostr side over --http.
// cvm channels lists the channel by its endpoint, and cvm channels close
// URL refunds what was not spent, once.
func TestChannelCLI_OverHTTP(t *testing.T) {
	w := newLNWorld(t, "--http", "127.0.0.1:0")
	key := newKeyFile(t, w.c)
	const deposit = 80
	for i := 1; i <= 3; i++ {
		code, out, errOut := runCVM(t, w.c, "call", w.http, "add", "a=1", "b=2", "--wallet-file", w.aliceWallet,
			"--max-sats", "10", "--yes", "--channel", strconv.Itoa(deposit), "--key", key)
		if code != 0 || !strings.Contains(out, `"sum":3`) {
			t.Fatalf("call %d: code %d, %q, %s", i, code, out, errOut)
		}
		if a, s := w.balances(t); a != (100-deposit)*1000 || s != deposit*1000 {
			t.Fatalf("after call %d: alice %d msat, srv %d msat; want the deposit moved once", i, a, s)
		}
	}
	const spent = 3 * 10
	rows := listChannelsJSON(t, w.c, key)
	if len(rows) != 1 || rows[0].Server != w.http || rows[0].Status != "open" || rows[0].Deposit != deposit*1000 ||
		rows[0].Spent != spent*1000 || rows[0].Unspent != (deposit-spent)*1000 || rows[0].LastUse.IsZero() {
		t.Fatalf("cvm channels: %+v; want one open channel with %s, 30 of 80 sats spent", rows, w.http)
	}
	if code, out, _ := runCVM(t, w.c, "channels", "--key", key); code != 0 || !strings.Contains(out, w.http) || !strings.Contains(out, "open") {
		t.Fatalf("cvm channels: code %d, %q", code, out)
	}

	closeArgs := []string{"channels", "close", w.http, "--wallet-file", w.aliceWallet, "--key", key}
	code, out, errOut := runCVM(t, w.c, closeArgs...)
	if code != 0 || !strings.Contains(out, "refunded 50 sats of channel "+rows[0].Channel) {
		t.Fatalf("close: code %d, %q, %s", code, out, errOut)
	}
	if a, s := w.balances(t); a != (100-spent)*1000 || s != spent*1000 {
		t.Fatalf("after the close: alice %d msat, srv %d msat; want all but the three prices back", a, s)
	}
	code, out, errOut = runCVM(t, w.c, closeArgs...)
	if code != 0 || !strings.Contains(out, "nothing to refund") {
		t.Fatalf("closing again: code %d, %q, %s", code, out, errOut)
	}
	if a, s := w.balances(t); a != (100-spent)*1000 || s != spent*1000 {
		t.Fatalf("after closing again: alice %d msat, srv %d msat; want nothing more moved", a, s)
	}
	if rows := listChannelsJSON(t, w.c, key); len(rows) != 1 || rows[0].Server != w.http || rows[0].Status != "refunded" || rows[0].Unspent != (deposit-spent)*1000 {
		t.Fatalf("cvm channels after the close: %+v", rows)
	}
}
