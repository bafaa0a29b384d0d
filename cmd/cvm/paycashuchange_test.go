package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
)

// A usd price paid in Cashu: the client pays the most it would pay at
// its own rate (0.005 usd at 50 000 usd a bitcoin, with a 30% tolerance:
// 13 sats) in the request, the gateway keeps its own conversion (10 sats)
// and returns 3 as change on payment_accepted, and the client keeps them
// before it answers. So when cvm call has returned, and again when a
// call over cvm proxy --cashu has, alice's Cashu wallet is down by
// exactly what was kept, the gateway's up by it, the budget counts only
// that, and the payment is reported at that amount; nothing waits for
// the change after the call.
func TestPayCLI_CashuUSDPriceChangeKept(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{usd: true})
	pay := append(w.rate.flags(), "--usd-rate-tolerance", "30", "--cashu", "--max-sats", "20")

	before := w.cashuBalance(t)
	code, out, errOut := cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: w.c.environ()},
		append([]string{"--json", "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--yes"}, pay...)...)
	var res struct {
		StructuredContent map[string]float64   `json:"structuredContent"`
		Meta              map[string][]payment `json:"_meta"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.StructuredContent["sum"] != 3 {
		t.Fatalf("cvm call --cashu of a usd price: code %d, %s, %s", code, out, errOut)
	}
	w.wantChangeKept(t, "once cvm call has returned", 1, before-10, 10)
	if ps := res.Meta["cvm/payments"]; len(ps) != 1 || ps[0].Amount != 10 || ps[0].PMI != cashuwallet.PMIDirect || !ps[0].Accepted {
		t.Fatalf("payments reported: %+v; want 10 sats, accepted", ps)
	}
	if !strings.Contains(errOut, "paid 10 sats to "+w.npub) {
		t.Fatalf("cvm call said: %s; want it paid 10 sats", errOut)
	}

	cs := hostOver(t, w.c, nil, append([]string{"proxy", w.npub, "--relay", w.relay}, pay...)...)
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil { // as a host does: the price is known before the call
		t.Fatal(err)
	}
	if res, err := addOverProxy(t, cs); err != nil || res.IsError {
		t.Fatalf("a call over cvm proxy --cashu: %v %+v", err, res)
	}
	w.wantChangeKept(t, "once the call over cvm proxy has returned", 2, before-20, 20)
}

// cashuBalance is what alice's Cashu wallet holds in all, as cvm cashu
// balance --json says.
func (w *cashuWorld) cashuBalance(t *testing.T) uint64 {
	t.Helper()
	code, out, errOut := w.c.run("--json", "cashu", "balance")
	var b struct {
		Total uint64 `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil {
		t.Fatalf("cvm cashu balance --json: %d %s %s", code, out, errOut)
	}
	return b.Total
}

// wantChangeKept checks, right after a call returned, that the gateway
// has returned change of n direct payments (its log says so) and that
// alice holds alice sats, the gateway srv, and that alice's budget counts
// srv spent with the gateway (and the 100 sats minted at the mint).
func (w *cashuWorld) wantChangeKept(t *testing.T, when string, n int, alice, srv uint64) {
	t.Helper()
	// Read first: the gateway's log is read from its pipe in the
	// background, which may lag; the wallets are files.
	a := w.cashuBalance(t)
	_, s := w.held(t)
	total, servers, err := (&payments.Budget{Path: filepath.Join(w.c.env["XDG_DATA_HOME"], "cvm", "payments", "budget.json")}).Today(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(context.Background(), 20*time.Second, func() bool {
		return strings.Count(w.gateway.Stderr.String(), "change=3 ") == n
	}) {
		t.Fatalf("%s: the gateway did not return 3 sats of change %d times: %s", when, n, w.gateway.Stderr)
	}
	if a != alice || s != srv {
		t.Fatalf("%s: alice holds %d, the gateway %d; want %d and %d", when, a, s, alice, srv)
	}
	if servers[w.pubkey] != int64(srv) || total != 100+int64(srv) {
		t.Fatalf("%s: the budget counts %d spent with the gateway, %d in all; want %d and %d", when, servers[w.pubkey], total, srv, 100+srv)
	}
}
