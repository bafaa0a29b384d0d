package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lnWorld is a relay, cvm wallet-sim with the wallets srv (0 sats) and
// alice (100 sats), and a cvm gateway charging 10 sats for add into srv.
type lnWorld struct {
	relay       string
	sim         walletSimReady
	aliceWallet string // alice's wallet file
	npub        string
	http        string // the gateway's --http endpoint, if given
	gateway     *proc
	gatewayArgs []string // its command line, to start it again
	c           *cli
}

func newLNWorld(t *testing.T, gatewayArgs ...string) *lnWorld {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	w := &lnWorld{relay: r.URL, c: newCLI(t)}
	_, w.sim = startWalletSim(t, w.c, "--relay", r.URL, "--wallet", "srv=0", "--wallet", "alice=100")
	dir := t.TempDir()
	srvWallet := writeSecret(t, dir, "srv.wallet", w.sim.Wallets["srv"])
	w.aliceWallet = writeSecret(t, dir, "alice.wallet", w.sim.Wallets["alice"])
	args := append([]string{"gateway", "--relay", r.URL, "--price", "tool:add=10", "--wallet-file", srvWallet}, gatewayArgs...)
	w.gatewayArgs = append(args, "--", demoServer(t))
	w.gateway = startCVM(t, w.c, w.gatewayArgs...)
	var ready gatewayHTTPReady
	w.gateway.ReadyLine(t, &ready)
	w.npub, w.http = ready.Npub, ready.HTTP
	return w
}

// balances are alice's and srv's, in msat.
func (w *lnWorld) balances(t *testing.T) (alice, srv int64) {
	return balanceOf(t, w.sim.Wallets["alice"]), balanceOf(t, w.sim.Wallets["srv"])
}

// Explicit gating through Lightning: cvm call --payment-interaction
// explicit (then payments.interaction in the config) gets -32042 with an
// invoice, pays it through cvm wallet-sim and sends the call again; each
// call moves exactly the price, and no payment_accepted comes (that is the
// transparent flow's).
func TestPayCLI_LightningExplicitGating(t *testing.T) {
	w := newLNWorld(t)
	call := func(extra ...string) {
		t.Helper()
		args := append([]string{"--json", "call", w.npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.aliceWallet, "--max-sats", "10", "--yes"}, extra...)
		code, out, errOut := w.c.run(args...)
		var res struct {
			StructuredContent map[string]float64   `json:"structuredContent"`
			Meta              map[string][]payment `json:"_meta"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.StructuredContent["sum"] != 3 {
			t.Fatalf("explicit call: code %d, %s, %s", code, out, errOut)
		}
		if ps := res.Meta["cvm/payments"]; len(ps) != 1 || ps[0].Amount != 10 || ps[0].PMI != payments.PMILightningBolt11 || ps[0].Accepted {
			t.Fatalf("payments reported: %+v", ps)
		}
	}
	call("--payment-interaction", "explicit")
	if a, s := w.balances(t); a != 90_000 || s != 10_000 {
		t.Fatalf("after one explicit call: alice %d msat, srv %d msat; want 90000 and 10000", a, s)
	}
	w.c.writeConfig("[payments]\ninteraction = \"explicit\"\n")
	call()
	if a, s := w.balances(t); a != 80_000 || s != 20_000 {
		t.Fatalf("after two explicit calls: alice %d msat, srv %d msat; want 80000 and 20000", a, s)
	}
	if code, _, errOut := w.c.run("call", w.npub, "add", "--relay", w.relay, "--max-sats", "10", "--payment-interaction", "barter"); code != exitLocal || !strings.Contains(errOut, "transparent or explicit") {
		t.Fatalf("a bad --payment-interaction: %d %s", code, errOut)
	}
}

// An invoice left unpaid past --payment-ttl: the gateway rejects the
// payment (payment_rejected, then -32014) and does not run the call; the
// client, which held back until then, cannot pay it any more (the invoice
// is expired); no balance moves.
func TestPayCLI_LightningExpiredInvoice(t *testing.T) {
	w := newLNWorld(t, "--payment-ttl", "1s")
	uri, err := nwc.ParseURI(w.sim.Wallets["alice"])
	if err != nil {
		t.Fatal(err)
	}
	wallet := nwc.NewClient(uri, nwc.ClientOptions{Timeout: 10 * time.Second})
	defer wallet.Close()
	handler := lightning.NewHandler(wallet)
	rejected := make(chan struct{})
	offers := make(chan contextvm.PaymentOffer, 1)
	pay := &cep8.PayOptions{
		Handlers: []payments.Handler{handler},
		Budget:   &payments.Budget{Unit: "sats", PerCall: 10},
		Report: func(r contextvm.PaymentReport) {
			if r.Rejected {
				close(rejected)
			}
		},
		// The person takes longer than the invoice lives: approval
		// comes only once the server has given up on the payment.
		Confirm: func(ctx context.Context, o contextvm.PaymentOffer) bool {
			offers <- o
			select {
			case <-rejected:
			case <-ctx.Done():
			}
			return true
		},
	}
	pk, err := nostrx.ParsePublicKey(w.npub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "expired-test", Version: "0"}, nil),
		contextvm.ClientOptions{Server: pk.Key.Hex(), Relays: []string{w.relay}, RequestTimeout: 20 * time.Second, Payer: pay.Payer()})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	// Two endings race, both right: the server's payment_rejected (-32014)
	// reaches the client first, or the client's handler, approved just
	// after the invoice expired, refuses to pay it (-32017). Either way it
	// says why, nothing is paid and the tool does not run.
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || (werr.Code != contextvm.CodePaymentRejected && werr.Code != contextvm.CodePaymentDeclined) || !strings.Contains(werr.Message, "expired") {
		t.Fatalf("an expired invoice: %v; want -32014 or -32017 saying it expired", err)
	}
	offer := <-offers
	if _, err := handler.Pay(ctx, payments.PaymentRequired{Amount: offer.Amount, PayReq: offer.PayReq, PMI: offer.PMI}, 10); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("paying the expired invoice: %v", err)
	}
	if a, s := w.balances(t); a != 100_000 || s != 0 {
		t.Fatalf("alice %d msat, srv %d msat; want 100000 and 0", a, s)
	}
	w.gateway.Stop(t, syscall.SIGTERM)
	if log := w.gateway.Stderr.String(); !strings.Contains(log, "payment not verified") || strings.Contains(log, "payment verified\"") {
		t.Fatalf("the gateway's log: %s", log)
	}
}
