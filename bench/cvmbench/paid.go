package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The paid calls: each path calls a free tool (echo) and a priced one (add,
// price sats) in turn, once each to warm up and then -paid-calls times
// each, with every peer a process of its own on one cvm relay, paying
// through one cvm wallet-sim: real Lightning invoices from a simulated
// network, real NIP-47 requests over the relay. On the channel path the
// client pays one deposit, on its warm-up call, and then a receipt on each
// paid call, which the gateway checks and records with no wallet.
const price = 1

// channelSlack is what the channel path's deposit holds beyond the calls'
// prices: closing the channel pays it back, and the check that the
// gateway kept exactly the prices covers that refund too.
const channelSlack = 5

// The paths measured, in the order they run.
const (
	pathCVM       = "cvm client → cvm gateway"
	pathChannel   = "cvm client → cvm gateway, on a channel"
	pathReference = "reference client → reference server"
	pathRefToGW   = "reference client → cvm gateway"
)

// The ratios of the paid calls, in report.Ratios: a gateway path's paid
// p50 over the reference pair's.
const (
	ratioCVMPaid   = "paid_p50_cvm_over_reference"
	ratioRefGWPaid = "paid_p50_reference_client_gateway_over_reference"
	// ratioChannel is the channel path's paid p50 over its free p50, the
	// free calls made on the same connection in turn with the paid ones
	// (#30's target: at most 1.1).
	ratioChannel = "channel_paid_p50_over_free"
)

// paidCallTimeout bounds a call, a wallet's answer included.
const paidCallTimeout = 30 * time.Second

// paidResult is one client–server path measured free and paid.
type paidResult struct {
	Path         string  `json:"path"`
	Calls        int     `json:"calls"`
	FreeP50ms    float64 `json:"free_p50_ms,omitempty"`
	FreeP90ms    float64 `json:"free_p90_ms,omitempty"`
	PaidP50ms    float64 `json:"paid_p50_ms,omitempty"`
	PaidP90ms    float64 `json:"paid_p90_ms,omitempty"`
	PaidOverFree float64 `json:"paid_over_free_p50,omitempty"`
	Error        string  `json:"error,omitempty"`
}

// paidBinaries are the programs the paid calls run: the cvm command and the
// demo MCP server the gateway fronts.
type paidBinaries struct{ CVM, DemoServer string }

// paidPeers are the processes every path shares.
type paidPeers struct {
	relay   string
	wallets map[string]string // name → NWC URI
	gateway string            // pubkey
	ref     string            // the reference server's pubkey
	zapGW   string            // the --zap-address gateway's pubkey (paidzap.go)
	direct  directPeers       // the --cashu-mint gateway and its mint (paiddirect.go)
}

// The wallet-sim's wallets: a receiving one for each server, a paying one
// for each client.
const (
	walletGateway   = "gateway"
	walletReference = "reference"
	walletCVMClient = "cvm-client"
	walletTSClient  = "ts-client"
)

// measurePaid starts the peers and measures the four paths in turn. An
// error is a peer that did not start; a path that fails says so in its
// result, and its figures are not given.
func measurePaid(ctx context.Context, root string, bins paidBinaries, calls int) ([]paidResult, map[string]float64, error) {
	tmp, err := os.MkdirTemp("", "cvmbench-paid-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	peers, err := startPaidPeers(ctx, root, bins, tmp, &stops)
	if err != nil {
		return nil, nil, err
	}

	var results []paidResult
	for _, p := range []struct {
		path, server, receiver string
		run                    func() ([]float64, []float64, error)
	}{
		{pathCVM, peers.gateway, walletGateway, func() ([]float64, []float64, error) {
			return cvmPaidCalls(ctx, peers.relay, peers.gateway, peers.wallets[walletCVMClient], calls, 0)
		}},
		{pathChannel, peers.gateway, walletGateway, func() ([]float64, []float64, error) {
			return cvmPaidCalls(ctx, peers.relay, peers.gateway, peers.wallets[walletCVMClient], calls, int64(calls+1)*price+channelSlack)
		}},
		{pathReference, peers.ref, walletReference, func() ([]float64, []float64, error) {
			return tsPaidCalls(ctx, root, peers.relay, peers.ref, peers.wallets[walletTSClient], calls)
		}},
		{pathRefToGW, peers.gateway, walletGateway, func() ([]float64, []float64, error) {
			return tsPaidCalls(ctx, root, peers.relay, peers.gateway, peers.wallets[walletTSClient], calls)
		}},
		{pathZap, peers.zapGW, walletZap, func() ([]float64, []float64, error) {
			return cvmPaidCalls(ctx, peers.relay, peers.zapGW, peers.wallets[walletCVMClient], calls, 0)
		}},
		{pathDirect, peers.direct.gateway, "", func() ([]float64, []float64, error) {
			return directPaidCalls(ctx, peers, filepath.Join(tmp, "direct-client"), calls)
		}},
	} {
		res := paidResult{Path: p.path, Calls: calls}
		held := peers.direct.held
		if p.receiver != "" {
			held = func(ctx context.Context) (int64, error) { return balance(ctx, peers.wallets[p.receiver]) }
		}
		free, paid, err := paidOnce(ctx, held, calls, p.run)
		if err != nil {
			res.Error = err.Error()
		} else {
			res.FreeP50ms, res.FreeP90ms = percentile(free, 0.5), percentile(free, 0.9)
			res.PaidP50ms, res.PaidP90ms = percentile(paid, 0.5), percentile(paid, 0.9)
			res.PaidOverFree = res.PaidP50ms / res.FreeP50ms
		}
		progressf("paid calls, %s: %s", p.path, res.summary())
		results = append(results, res)
	}
	return results, paidRatios(results), nil
}

// paidOnce runs a path and checks that its receiving wallet got exactly
// the price of every paid call, warm-up included: a figure is only that
// of calls that were paid, once each.
func paidOnce(ctx context.Context, held func(context.Context) (int64, error), calls int, run func() ([]float64, []float64, error)) ([]float64, []float64, error) {
	before, err := held(ctx)
	if err != nil {
		return nil, nil, err
	}
	free, paid, err := run()
	if err != nil {
		return nil, nil, err
	}
	if len(free) != calls || len(paid) != calls {
		return nil, nil, fmt.Errorf("%d free and %d paid calls timed, want %d each", len(free), len(paid), calls)
	}
	after, err := held(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := collected(before, after, calls+1); err != nil {
		return nil, nil, err
	}
	return free, paid, nil
}

// collected says whether a server's wallet, holding before msat and then
// after, received the price of paid calls: no more (a call charged twice),
// no less (a call run unpaid, or not priced at all).
func collected(before, after int64, paid int) error {
	if want := int64(paid) * price * 1000; after-before != want {
		return fmt.Errorf("the server's wallet received %d msat for %d paid calls, want %d", after-before, paid, want)
	}
	return nil
}

// paidRatios are cvm's paid p50s over the reference pair's, of the paths
// measured.
func paidRatios(results []paidResult) map[string]float64 {
	p50 := map[string]float64{}
	for _, r := range results {
		if r.Error == "" {
			p50[r.Path] = r.PaidP50ms
		}
	}
	ratios := map[string]float64{}
	for _, r := range results {
		if r.Path == pathChannel && r.Error == "" {
			ratios[ratioChannel] = r.PaidOverFree
		}
		if r.Path == pathDirect && r.Error == "" {
			ratios[ratioDirect] = r.PaidOverFree
		}
	}
	ref, ok := p50[pathReference]
	if !ok {
		return ratios
	}
	if c, ok := p50[pathCVM]; ok {
		ratios[ratioCVMPaid] = c / ref
	}
	if c, ok := p50[pathRefToGW]; ok {
		ratios[ratioRefGWPaid] = c / ref
	}
	return ratios
}

func (r paidResult) summary() string {
	if r.Error != "" {
		return "not measured: " + r.Error
	}
	return fmt.Sprintf("free p50 %.1f ms (p90 %.1f), paid p50 %.1f ms (p90 %.1f), paid/free %.1f",
		r.FreeP50ms, r.FreeP90ms, r.PaidP50ms, r.PaidP90ms, r.PaidOverFree)
}

// startPaidPeers starts cvm relay, cvm wallet-sim, cvm gateway (the demo
// server, add priced) and the reference server (add priced, its own NWC
// processor), each stopped by a function appended to stops.
func startPaidPeers(ctx context.Context, root string, bins paidBinaries, tmp string, stops *[]func()) (paidPeers, error) {
	var peers paidPeers
	// cvm reads its identity and data from here, and nothing of the
	// user's: not their config, not a wallet in their environment.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"),
		"XDG_DATA_HOME=" + filepath.Join(tmp, "data"), "XDG_CACHE_HOME=" + filepath.Join(tmp, "cache")}
	cvm := func(ready any, args ...string) error {
		args = append([]string{args[0], "--log-level", "warn"}, args[1:]...)
		c, err := startChild("cvm "+args[0], "", bins.CVM, env, args...)
		if err != nil {
			return err
		}
		*stops = append(*stops, c.stop)
		return c.ready(ctx, ready)
	}

	// The relay's per-IP limits off: every peer is on 127.0.0.1.
	var relay struct{ URL string }
	if err := cvm(&relay, "relay", "--listen", "127.0.0.1:0", "--memory",
		"--events-per-second", "-1", "--connections-per-second", "-1", "--max-subscriptions", "-1", "--max-filters", "-1"); err != nil {
		return peers, err
	}
	peers.relay = relay.URL

	var sim struct {
		Wallets map[string]string
		zapSim
	}
	if err := cvm(&sim, append([]string{"wallet-sim", "--relay", peers.relay,
		"--wallet", walletGateway + "=0", "--wallet", walletReference + "=0",
		"--wallet", walletCVMClient + "=1000000", "--wallet", walletTSClient + "=1000000", "--wallet", walletMint + "=0"}, zapSimArgs(tmp)...)...); err != nil {
		return peers, err
	}
	peers.wallets = sim.Wallets

	walletFile := filepath.Join(tmp, "gateway.wallet")
	if err := os.WriteFile(walletFile, []byte(peers.wallets[walletGateway]), 0o600); err != nil {
		return peers, err
	}
	var gw struct{ Pubkey string }
	if err := cvm(&gw, "gateway", "--relay", peers.relay, "--price", fmt.Sprintf("tool:add=%d", price),
		"--wallet-file", walletFile, "--", bins.DemoServer); err != nil {
		return peers, err
	}
	peers.gateway = gw.Pubkey
	var err error
	if peers.zapGW, err = startZapGateway(ctx, bins, env, peers.relay, sim.zapSim, stops); err != nil {
		return peers, err
	}
	if peers.direct, err = startDirectPeers(cvm, bins, peers, tmp); err != nil {
		return peers, err
	}

	ts, err := startNode(root, "ts-server.mjs", "RELAY_URL="+peers.relay, fmt.Sprintf("PRICE_ADD=%d", price), "NWC_URI="+peers.wallets[walletReference])
	if err != nil {
		return peers, fmt.Errorf("%w (run make interop-deps)", err)
	}
	*stops = append(*stops, ts.stop)
	var ref struct{ Pubkey string }
	if err := ts.ready(ctx, &ref); err != nil {
		return peers, fmt.Errorf("%w (run make interop-deps)", err)
	}
	peers.ref = ref.Pubkey
	return peers, waitListening(ctx, peers.relay, peers.ref)
}

// cvmPaidCalls is the cvm client library, paying through cep8 and its
// Lightning handler from the wallet uri, calling server. With a deposit
// (sats) it pays over a channel: the warm-up call opens it, and it is
// closed, its rest refunded, once the calls are made.
func cvmPaidCalls(ctx context.Context, relayURL, server, uri string, calls int, deposit int64) (free, paid []float64, err error) {
	u, err := nwc.ParseURI(uri)
	if err != nil {
		return nil, nil, err
	}
	wallet := nwc.NewClient(u, nwc.ClientOptions{Timeout: paidCallTimeout})
	defer wallet.Close()
	var invoices atomic.Int64 // paid by the wallet
	pay := &cep8.PayOptions{
		Handlers: []payments.Handler{lightning.NewHandler(wallet)},
		Budget:   &payments.Budget{Unit: "sats", PerCall: price},
		Report: func(r contextvm.PaymentReport) {
			if r.Paid && !r.Accepted && !r.Rejected {
				invoices.Add(1)
			}
		},
	}
	if deposit > 0 {
		pay.Channel = &cep8.ChannelOptions{DepositSats: deposit, Wallet: wallet}
	}
	// One key for the calls and the channel's close.
	opts := contextvm.ClientOptions{Server: server, Relays: []string{relayURL}, RequestTimeout: paidCallTimeout,
		Signer: contextvm.NewKeySigner(nostr.Generate()), Payer: pay.Payer()}
	if free, paid, err = timedCalls(ctx, opts, calls, false); err != nil {
		return nil, nil, err
	}
	if deposit > 0 {
		if err := closeBenchChannel(ctx, opts, calls+1, invoices.Load()); err != nil {
			return nil, nil, err
		}
	}
	return free, paid, nil
}

// timedCalls connects with opts and calls echo (free) and add (priced) in
// turn, once each to warm up and then calls times each, timed. With list
// it lists the tools first, so that the client knows add's price before
// it calls it (a direct payment goes in the request then).
func timedCalls(ctx context.Context, opts contextvm.ClientOptions, calls int, list bool) (free, paid []float64, err error) {
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvmbench-paid"}, nil), opts)
	if err != nil {
		return nil, nil, err
	}
	defer cs.Close()
	if list {
		if _, err := cs.ListTools(ctx, nil); err != nil {
			return nil, nil, err
		}
	}
	call := func(times *[]float64, name string, args map[string]any, wantSum float64) error {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if times != nil {
			*times = append(*times, ms(time.Since(t0)))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if sum, _ := res.StructuredContent.(map[string]any); res.IsError || (wantSum != 0 && sum["sum"] != wantSum) {
			return fmt.Errorf("%s: error %v, structured content %v", name, res.IsError, res.StructuredContent)
		}
		return nil
	}
	// Once each to warm up, untimed; then timed, in turn.
	for i := range calls + 1 {
		f, p := &free, &paid
		if i == 0 {
			f, p = nil, nil
		}
		if err := call(f, "echo", map[string]any{"text": "bench"}, 0); err != nil {
			return nil, nil, err
		}
		if err := call(p, "add", map[string]any{"a": 2, "b": 3}, 5); err != nil {
			return nil, nil, err
		}
	}
	return free, paid, nil
}

// closeBenchChannel checks that the channel path paid one invoice, the
// deposit, and a receipt for each of its paid calls, then closes the
// channel: the gateway refunds what was not spent.
func closeBenchChannel(ctx context.Context, opts contextvm.ClientOptions, paidCalls int, invoices int64) error {
	payer := opts.Payer.(*cep8.Payer)
	server, err := nostr.PubKeyFromHex(opts.Server)
	if err != nil {
		return err
	}
	st, ok := payer.Channel(ctx, server)
	switch {
	case !ok:
		return errors.New("the gateway opened no channel")
	case invoices != 1 || st.Nonce != uint64(paidCalls) || st.Accumulated != uint64(paidCalls)*price*1000:
		return fmt.Errorf("%d invoices paid and %d receipts for %d msat on the channel; want 1 invoice and %d receipts", invoices, st.Nonce, st.Accumulated, paidCalls)
	}
	if _, err := payer.CloseChannel(ctx, opts); err != nil {
		return fmt.Errorf("closing the channel: %w", err)
	}
	return nil
}

// tsPaidCalls is the reference client (js/bench-pay-client.mjs) paying from
// the wallet uri, calling server.
func tsPaidCalls(ctx context.Context, root, relayURL, server, uri string, calls int) (free, paid []float64, err error) {
	var got struct {
		FreeMs []float64 `json:"freeMs"`
		PaidMs []float64 `json:"paidMs"`
		Error  string    `json:"error"`
	}
	err = runNode(ctx, root, "bench-pay-client.mjs", &got, "RELAY_URL="+relayURL, "SERVER_PUBKEY="+server, "NWC_URI="+uri,
		fmt.Sprint("CALLS=", calls), "FREE_TOOL=echo", `FREE_ARGS={"text":"bench"}`, "PAID_TOOL=add", `PAID_ARGS={"a":2,"b":3}`, "WANT_SUM=5",
		fmt.Sprint("TIMEOUT_MS=", paidCallTimeout.Milliseconds()))
	if err != nil {
		return nil, nil, err
	}
	if got.Error != "" {
		return nil, nil, errors.New(firstLine(got.Error))
	}
	return got.FreeMs, got.PaidMs, nil
}

// balance is a wallet's balance in msat, asked over NWC.
func balance(ctx context.Context, uri string) (int64, error) {
	u, err := nwc.ParseURI(uri)
	if err != nil {
		return 0, err
	}
	c := nwc.NewClient(u, nwc.ClientOptions{Timeout: paidCallTimeout})
	defer c.Close()
	b, err := c.GetBalance(ctx)
	if err != nil {
		return 0, fmt.Errorf("the wallet's balance: %w", err)
	}
	return b, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
