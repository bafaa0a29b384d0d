package interop

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// walletSim is a running `cvm wallet-sim`: its wallets' connection URIs,
// by name.
type walletSim struct {
	Wallets map[string]string `json:"wallets"`
	// With --lnaddr: each wallet's Lightning address, and the file of the
	// throw-away CA its HTTPS certificate is signed by.
	Addresses map[string]string `json:"addresses"`
	CAFile    string            `json:"ca_file"`
}

// startWalletSim runs `cvm wallet-sim` on relayURL with the given
// NAME=SATS wallets (and flags, written --flag=value) and waits for its
// ready line; the test's end stops it.
func startWalletSim(t *testing.T, relayURL string, wallets ...string) walletSim {
	t.Helper()
	args := []string{"wallet-sim", "--relay", relayURL}
	var names []string
	for _, w := range wallets {
		if strings.HasPrefix(w, "--") {
			args = append(args, w)
			continue
		}
		args = append(args, "--wallet", w)
		names = append(names, w)
	}
	p := cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(t.TempDir())}, args...)
	t.Cleanup(func() { p.Terminate(syscall.SIGTERM, 10*time.Second) })
	var sim walletSim
	p.ReadyLine(t, &sim)
	if len(sim.Wallets) != len(names) {
		t.Fatalf("wallet-sim ready line %+v, want %d wallets; stderr: %s", sim, len(names), p.Stderr)
	}
	return sim
}

// walletFile writes a connection URI into a 0600 file, as a user would.
func walletFile(t *testing.T, uri string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wallet")
	if err := os.WriteFile(path, []byte(uri), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// balance is a wallet's balance in msat, asked over NWC.
func balance(t *testing.T, uri string) int64 {
	t.Helper()
	var b int64
	withNWC(t, uri, func(ctx context.Context, c *nwc.Client) (err error) {
		b, err = c.GetBalance(ctx)
		return err
	})
	return b
}

func wantBalances(t *testing.T, sim walletSim, want map[string]int64) {
	t.Helper()
	for name, msat := range want {
		if got := balance(t, sim.Wallets[name]); got != msat {
			t.Errorf("wallet %s holds %d msat; want %d", name, got, msat)
		}
	}
}

type jsNotification struct {
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

type payClientResult struct {
	OK            bool             `json:"ok"`
	Step          string           `json:"step"`
	Error         string           `json:"error"`
	Errors        []string         `json:"errors"`
	Notifications []jsNotification `json:"notifications"`
	Result        toolResult       `json:"result"`
	Results       []toolResult     `json:"results"` // each call's, with CALLS
}

type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (r payClientResult) notification(method string) (jsNotification, int) {
	var found jsNotification
	n := 0
	for _, x := range r.Notifications {
		if x.Method == method {
			found, n = x, n+1
		}
	}
	return found, n
}

// TestPay_ReferenceClientPaysGateway: the reference client, wrapped with
// its own withClientPayments and LnBolt11NwcPaymentHandler (its NWC client
// speaks NIP-04) on a cvm wallet-sim wallet, calls a tool cvm gateway
// charges 10 sats for. It is asked for a BOLT11 invoice in CEP-8's
// payment_required, pays it, is told payment_accepted, gets the result,
// and the balances move by exactly the price. The gateway settled the
// payment on the wallet's payment_received notification, not by a lookup,
// and its log never shows its wallet's secret.
func TestPay_ReferenceClientPaysGateway(t *testing.T) {
	server := everything(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0", "alice=100")
	gw := startGateway(t, "--relay", r.URL, "--price", "tool:get-sum=10", "--wallet-file", walletFile(t, sim.Wallets["srv"]),
		"--log-level", "debug", "--", "node", server)

	res := referencePaysGetSum(t, r.URL, gw, sim.Wallets["alice"], 10, "lnbcrt100n1")
	acc, n := res.notification(contextvm.MethodPaymentAccepted)
	if n != 1 || acc.Params["amount"] != float64(10) || acc.Params["pmi"] != payments.PMILightningBolt11 {
		t.Errorf("payment_accepted seen by the reference client (%d): %+v", n, acc.Params)
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})
	wantSettledByNotification(t, gw, sim.Wallets["srv"])
}

// referenceClientGetsSum has ts-pay-client.mjs, paying from the wallet
// uri, call the gateway's get-sum a=2 b=3, and checks it got 5.
func referenceClientGetsSum(t *testing.T, relayURL string, gw gatewayInfo, uri string) payClientResult {
	t.Helper()
	var res payClientResult
	runScript(t, "ts-pay-client.mjs", map[string]string{
		"RELAY_URL": relayURL, "SERVER_PUBKEY": gw.Npub, "NWC_URI": uri,
		"TOOL": "get-sum", "ARGS": `{"a":2,"b":3}`,
	}, &res)
	if !res.OK || res.Result.IsError || len(res.Result.Content) == 0 || !strings.Contains(res.Result.Content[0].Text, "5") {
		t.Fatalf("the reference client's paid call: %+v; gateway log:\n%s", res, gw.stderr)
	}
	return res
}

// referencePaysGetSum is referenceClientGetsSum that also checks the
// call got exactly one payment_required for sats sats over Lightning,
// whose invoice starts with invoice.
func referencePaysGetSum(t *testing.T, relayURL string, gw gatewayInfo, uri string, sats int64, invoice string) payClientResult {
	t.Helper()
	res := referenceClientGetsSum(t, relayURL, gw, uri)
	req, n := res.notification(contextvm.MethodPaymentRequired)
	if n != 1 || req.Params["amount"] != float64(sats) || req.Params["pmi"] != payments.PMILightningBolt11 ||
		!strings.HasPrefix(req.Params["pay_req"].(string), invoice) {
		t.Errorf("payment_required seen by the reference client (%d): %+v", n, req.Params)
	}
	return res
}

// wantSettledByNotification checks that the gateway settled its paid
// call on its wallet's notification, made no lookup_invoice, and never
// logged the secret of its wallet URI.
func wantSettledByNotification(t *testing.T, gw gatewayInfo, uri string) {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if err := gw.stderr.WaitFor(ctx, "payment settled by the wallet's notification"); err != nil {
		t.Error(err)
	}
	logs := gw.stderr.String()
	if strings.Contains(logs, "settled by lookup") || strings.Contains(logs, "method=lookup_invoice") {
		t.Errorf("the gateway looked the payment up:\n%s", logs)
	}
	u, err := nwc.ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs, u.Secret().Hex()) {
		t.Error("the gateway logged its wallet's secret")
	}
}

// paidCall is cvm call --json's answer to a paid call: the result and
// the payments it reports.
type paidCall struct {
	StructuredContent map[string]float64 `json:"structuredContent"`
	Meta              map[string][]struct {
		Amount   int64  `json:"amount"`
		Unit     string `json:"unit"`
		What     string `json:"capability"`
		PMI      string `json:"pmi"`
		Accepted bool   `json:"accepted"`
	} `json:"_meta"`
}

// startPricedReferenceServer runs ts-server.mjs charging price sats for add
// through the reference SDK's withServerPayments and its
// LnBolt11NwcPaymentProcessor on the wallet uri. verify "poll" makes the
// processor poll lookup_invoice; "" leaves its default, which waits for the
// wallet's payment_received notification (NIP-04, kind 23196) when the
// wallet's info event offers it, as cvm wallet-sim's does.
func startPricedReferenceServer(t *testing.T, relayURL, uri, price, verify string) string {
	t.Helper()
	return startTSServer(t, relayURL, "optional", "optional", map[string]string{"PRICE_ADD": price, "NWC_URI": uri, "NWC_VERIFY": verify})
}

// TestPay_CvmCallPaysReferenceServer: cvm call, paying through cvm
// wallet-sim, pays the reference server whose own
// LnBolt11NwcPaymentProcessor asks the same simulator for its invoices and
// verifies them there: by the wallet's payment_received notification (its
// default, "notification") and by polling lookup_invoice ("poll"). The
// price comes from the server's cap tag on tools/list, the payment from
// its payment_required; the call returns and exactly the price moved. The
// same call with a cap below the price is refused before anything is
// paid.
func TestPay_CvmCallPaysReferenceServer(t *testing.T) {
	for _, verify := range []string{"notification", "poll"} {
		t.Run(verify, func(t *testing.T) { cvmCallPaysReferenceServer(t, strings.TrimPrefix(verify, "notification")) })
	}
}

func cvmCallPaysReferenceServer(t *testing.T, verify string) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0", "alice=100")
	pub := startPricedReferenceServer(t, r.URL, sim.Wallets["srv"], "10", verify)
	home, alice := t.TempDir(), walletFile(t, sim.Wallets["alice"])

	code, out, errOut := cvm(t, home, "--json", "tools", pub, "--relay", r.URL)
	var listed struct {
		Prices map[string]struct {
			Amount string `json:"amount"`
			Unit   string `json:"unit"`
		} `json:"prices"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || listed.Prices["add"].Amount != "10" || listed.Prices["add"].Unit != "sats" {
		t.Fatalf("cvm tools on the reference server: %d %s %s", code, out, errOut)
	}

	code, out, errOut = cvm(t, home, "--json", "call", pub, "add", "a=1", "b=2", "--relay", r.URL, "--wallet-file", alice, "--max-sats", "10", "--yes")
	var called paidCall
	if code != 0 || json.Unmarshal([]byte(out), &called) != nil || called.StructuredContent["sum"] != 3 {
		t.Fatalf("cvm call paying the reference server: %d %s %s", code, out, errOut)
	}
	if ps := called.Meta["cvm/payments"]; len(ps) != 1 || ps[0].Amount != 10 || ps[0].Unit != "sats" || ps[0].What != "tool:add" ||
		ps[0].PMI != payments.PMILightningBolt11 || !ps[0].Accepted {
		t.Errorf("payments reported: %+v", ps)
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})

	code, _, errOut = cvm(t, home, "call", pub, "add", "a=1", "b=2", "--relay", r.URL, "--wallet-file", alice, "--max-sats", "5", "--yes")
	if code != 5 || !strings.Contains(errOut, "--max-sats") {
		t.Errorf("a call over the cap: exit %d, %s; want 5 (not paid) naming --max-sats", code, errOut)
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})
}

// TestPay_ReferenceServerWireReadAsSent: what the reference server sends
// for payments, read by cvm's client library as sent: its pmi tag (on its
// first answer), its cap tag (on tools/list), and every field of its
// payment_required (amount, the BOLT11 invoice its processor got from the
// wallet, pmi, description); the processor verifies the payment by the
// wallet's NIP-04 notification, its default; then a priced call over the client's budget
// fails locally with -32017 "over-cap" and nothing is paid.
func TestPay_ReferenceServerWireReadAsSent(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0", "alice=100")
	pub := startPricedReferenceServer(t, r.URL, sim.Wallets["srv"], "7", "")

	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	reports := make(chan contextvm.PaymentReport, 4)
	transport, cs := connectPaying(ctx, t, r.URL, pub, sim.Wallets["alice"], 7, reports)
	if got := transport.ServerSupport().PMIs; !slices.Equal(got, []string{payments.PMILightningBolt11}) {
		t.Errorf("pmi tags read from the reference server's first answer: %q", got)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	prices := transport.Prices()
	if len(prices) != 1 || strings.Join(prices[0].Tag(), " ") != "cap tool:add 7 sats" {
		t.Errorf("cap tags read from the reference server's tools/list: %+v", prices)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 2}})
	if err != nil || res.IsError {
		t.Fatalf("paid call: %v %+v", err, res)
	}
	paid := <-reports
	if paid.Amount != 7 || paid.Unit != "sats" || paid.PMI != payments.PMILightningBolt11 || paid.Capability != "tool:add" ||
		paid.Description != "add two numbers" || !strings.HasPrefix(paid.PayReq, "lnbcrt70n1") || !paid.Paid {
		t.Errorf("payment_required read from the reference server: %+v", paid)
	}
	wantBalances(t, sim, map[string]int64{"alice": 93_000, "srv": 7_000})

	_, cs = connectPaying(ctx, t, r.URL, pub, sim.Wallets["alice"], 6, reports)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 2}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodePaymentDeclined || !strings.Contains(string(werr.Data), contextvm.DeclinedOverCap) {
		t.Fatalf("a call over the budget: %v; want -32017 over-cap", err)
	}
	wantBalances(t, sim, map[string]int64{"alice": 93_000, "srv": 7_000})
}

// connectPaying connects cvm's client library to server, paying from the
// wallet uri up to perCall sats a call and reporting each payment.
func connectPaying(ctx context.Context, t *testing.T, relayURL, server, uri string, perCall int64, reports chan<- contextvm.PaymentReport) (*contextvm.ClientTransport, *mcp.ClientSession) {
	t.Helper()
	u, err := nwc.ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	wallet := nwc.NewClient(u, nwc.ClientOptions{Timeout: 10 * time.Second})
	t.Cleanup(func() { wallet.Close() })
	transport, err := contextvm.NewClientTransport(contextvm.ClientOptions{
		Server: server, Relays: []string{relayURL}, RequestTimeout: 30 * time.Second,
		Payer: (&cep8.PayOptions{
			Handlers: []payments.Handler{lightning.NewHandler(wallet)},
			Budget:   &payments.Budget{Unit: "sats", PerCall: perCall},
			Report:   func(p contextvm.PaymentReport) { reports <- p },
		}).Payer(),
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cvm-wire-check", Version: "0"}, nil).Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return transport, cs
}
