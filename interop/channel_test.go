package interop

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPay_ReferenceClientPaysChannelGateway: a cvm gateway that offers
// prepaid payment channels (its initialize lists
// bitcoin-lightning-channel-v1 next to bitcoin-lightning-bolt11) is
// called three times by the reference client with its NWC handler, which
// does not know channels: it is asked for an invoice each time, pays it,
// is told payment_accepted, gets each result, and the balances move by
// exactly the three prices. The gateway sees no channel tag.
func TestPay_ReferenceClientPaysChannelGateway(t *testing.T) {
	server := everything(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0", "alice=100")
	gw := startGateway(t, "--relay", r.URL, "--price", "tool:get-sum=10", "--wallet-file", walletFile(t, sim.Wallets["srv"]), "--", "node", server)
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	if err := gw.stderr.WaitFor(ctx, "payment channels offered"); err != nil {
		t.Fatalf("%v; the gateway's log: %s", err, gw.stderr)
	}
	transport, _ := connectPaying(ctx, t, r.URL, gw.Pubkey, sim.Wallets["alice"], 0, make(chan contextvm.PaymentReport, 1))
	if got := transport.ServerSupport().PMIs; !slices.Equal(got, []string{payments.PMILightningBolt11, channel.PMI}) {
		t.Fatalf("pmi tags of the gateway's initialize: %q; want %s and %s", got, payments.PMILightningBolt11, channel.PMI)
	}

	var res payClientResult
	runScript(t, "ts-pay-client.mjs", map[string]string{
		"RELAY_URL": r.URL, "SERVER_PUBKEY": gw.Npub, "NWC_URI": sim.Wallets["alice"],
		"TOOL": "get-sum", "ARGS": `{"a":2,"b":3}`, "CALLS": "3",
	}, &res)
	if !res.OK || len(res.Results) != 3 {
		t.Fatalf("the reference client's three paid calls: %+v", res)
	}
	for i, r := range res.Results {
		if r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, "5") {
			t.Errorf("call %d: %+v", i+1, r)
		}
	}
	for _, method := range []string{contextvm.MethodPaymentRequired, contextvm.MethodPaymentAccepted} {
		n := 0
		for _, x := range res.Notifications {
			if x.Method == method {
				n++
				if x.Params["amount"] != float64(10) || x.Params["pmi"] != payments.PMILightningBolt11 {
					t.Errorf("%s: %+v; want 10 sats by %s", method, x.Params, payments.PMILightningBolt11)
				}
			}
		}
		if n != 3 {
			t.Errorf("%d %s for three calls; want 3", n, method)
		}
	}
	wantBalances(t, sim, map[string]int64{"alice": 70_000, "srv": 30_000})
	if logs := gw.stderr.String(); strings.Contains(logs, "channel receipt refused") || strings.Contains(logs, "channel opened") {
		t.Errorf("the gateway saw a channel from a client that knows none:\n%s", logs)
	}
}

// TestPay_CvmChannelClientPaysReferenceServer: cvm's client, set to pay
// over channels with a 50-sat deposit, calls the reference server, whose
// initialize lists bitcoin-lightning-bolt11 only. It opens no channel: its
// requests, read off the relay, carry no channel, channel_open or
// channel_topup tag; each call is asked for and pays its own invoice, and
// the balances move by exactly the three prices.
func TestPay_CvmChannelClientPaysReferenceServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0", "alice=100")
	pub := startPricedReferenceServer(t, r.URL, sim.Wallets["srv"], "7", "")
	server, err := nostrx.ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 90*time.Second)
	defer cancel()

	// The client's requests, as the relay carries them (unencrypted, so
	// that their tags can be read).
	clientKey := nostr.Generate()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	sub := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Authors: []nostr.PubKey{clientKey.Public()}}, 64)
	defer sub.Close()
	select {
	case <-sub.Ready():
	case <-ctx.Done():
		t.Fatal("the relay did not confirm the subscription")
	}

	u, err := nwc.ParseURI(sim.Wallets["alice"])
	if err != nil {
		t.Fatal(err)
	}
	wallet := nwc.NewClient(u, nwc.ClientOptions{Timeout: 10 * time.Second})
	defer wallet.Close()
	var mu sync.Mutex
	var paid []contextvm.PaymentReport
	pay := &cep8.PayOptions{
		Handlers: []payments.Handler{lightning.NewHandler(wallet)},
		Budget:   &payments.Budget{Unit: "sats", PerCall: 7},
		Channel:  &cep8.ChannelOptions{DepositSats: 50, Wallet: wallet},
		Report: func(p contextvm.PaymentReport) {
			if p.Paid && !p.Accepted && !p.Rejected {
				mu.Lock()
				paid = append(paid, p)
				mu.Unlock()
			}
		},
	}
	payer := pay.Payer()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvm-channel-client", Version: "0"}, nil), contextvm.ClientOptions{
		Server: server.Key.Hex(), Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(clientKey), Encryption: contextvm.EncryptDisabled,
		RequestTimeout: 30 * time.Second, Payer: payer,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": i, "b": 2}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i+1, err, res)
		}
	}
	mu.Lock()
	if len(paid) != 3 || slices.ContainsFunc(paid, func(p contextvm.PaymentReport) bool { return p.Amount != 7 || p.PMI != payments.PMILightningBolt11 }) {
		t.Errorf("payments made: %+v; want three invoices of 7 sats", paid)
	}
	mu.Unlock()
	wantBalances(t, sim, map[string]int64{"alice": 79_000, "srv": 21_000})
	if st, ok := payer.(*cep8.Payer).Channel(ctx, server.Key); ok {
		t.Errorf("a channel with a server that offers none: %+v", st)
	}

	calls := 0
	for calls < 3 {
		select {
		case evt := <-sub.Events():
			if !strings.Contains(evt.Content, `"tools/call"`) {
				continue
			}
			calls++
			for _, name := range []string{channel.TagName, cep8.TagChannelOpen, cep8.TagChannelTopUp} {
				if tag := evt.Tags.Find(name); tag != nil {
					t.Errorf("a request to a server without channels carries %q", tag)
				}
			}
		case <-ctx.Done():
			t.Fatalf("saw %d of the 3 tools/call requests on the relay", calls)
		}
	}
}
