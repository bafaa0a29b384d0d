package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
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

// announcedPMIs waits for the announcement (kind 11316) of the gateway
// with npub on relayURL and returns its pmi tags.
func announcedPMIs(t *testing.T, relayURL, npub string) []string {
	t.Helper()
	pk, err := nostrx.ParsePublicKey(npub)
	if err != nil {
		t.Fatal(err)
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	var pmis []string
	testwait.Eventually(t, 20*time.Second, "the gateway's announcement", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		events, err := pool.Query(ctx, nostr.Filter{Kinds: []nostr.Kind{contextvm.KindServerAnnouncement}, Authors: []nostr.PubKey{pk.Key}})
		if err != nil || len(events) == 0 {
			return false
		}
		pmis = nil
		for _, tag := range events[0].Tags {
			if len(tag) == 2 && tag[0] == contextvm.TagPMI {
				pmis = append(pmis, tag[1])
			}
		}
		return true
	})
	return pmis
}

// channelPayer pays the gateway of w from alice's wallet over channels
// of deposit sats, at most 10 sats a call, and counts the invoices alice
// pays.
type channelPayer struct {
	opts    *cep8.PayOptions
	mu      sync.Mutex
	invoice int // Lightning invoices paid
}

func newChannelPayer(t *testing.T, aliceURI string, deposit int64) *channelPayer {
	t.Helper()
	u, err := nwc.ParseURI(aliceURI)
	if err != nil {
		t.Fatal(err)
	}
	wallet := nwc.NewClient(u, nwc.ClientOptions{Timeout: 10 * time.Second})
	t.Cleanup(func() { wallet.Close() })
	p := &channelPayer{}
	p.opts = &cep8.PayOptions{
		Handlers: []payments.Handler{lightning.NewHandler(wallet)},
		Budget:   &payments.Budget{Unit: "sats", PerCall: 10},
		Channel:  &cep8.ChannelOptions{DepositSats: deposit, Wallet: wallet},
		Report: func(r contextvm.PaymentReport) {
			if r.Paid && !r.Accepted && !r.Rejected && r.PMI == payments.PMILightningBolt11 {
				p.mu.Lock()
				p.invoice++
				p.mu.Unlock()
			}
		},
	}
	return p
}

// connect opens a session with the server (hex key) on relay, paying
// through p with a key of its own, and returns its options (the close
// must be sent with the same key: a channel is its client key's), its
// payer and the session, closed with the test.
func (p *channelPayer) connect(ctx context.Context, t *testing.T, server, relay string) (contextvm.ClientOptions, *cep8.Payer, *mcp.ClientSession) {
	t.Helper()
	opts := contextvm.ClientOptions{Server: server, Relays: []string{relay}, Signer: contextvm.NewKeySigner(nostr.Generate()),
		RequestTimeout: testwait.Timeout(30 * time.Second), Payer: p.opts.Payer()}
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "channel-test", Version: "0"}, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return opts, opts.Payer.(*cep8.Payer), cs
}

func (p *channelPayer) invoices() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.invoice
}

// A cvm gateway whose wallet may pay_invoice offers channels: its
// announcement lists bitcoin-lightning-channel-v1, and a client paying
// over channels makes five calls on one Lightning payment (the deposit)
// and gets all but the five prices back when it closes the channel,
// through cvm wallet-sim.
func TestGatewayChannel_FiveCallsOneDepositCloseRefundsTheRest(t *testing.T) {
	w := newLNWorld(t, "--announce")
	if pmis := announcedPMIs(t, w.relay, w.npub); !slices.Contains(pmis, channel.PMI) || !slices.Contains(pmis, payments.PMILightningBolt11) {
		t.Fatalf("announced pmis %v; want %s and %s", pmis, payments.PMILightningBolt11, channel.PMI)
	}
	w.gateway.Stderr.Await(t, 10*time.Second, "payment channels offered")

	pay := newChannelPayer(t, w.sim.Wallets["alice"], 80)
	pk, err := nostrx.ParsePublicKey(w.npub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 90*time.Second)
	defer cancel()
	opts, payer, cs := pay.connect(ctx, t, pk.Key.Hex(), w.relay)
	for i := range 5 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": i, "b": 1}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i+1, err, res)
		}
		if a, s := w.balances(t); a != 20_000 || s != 80_000 {
			t.Fatalf("after call %d: alice %d msat, srv %d msat; want the 80-sat deposit moved once (20000 and 80000)", i+1, a, s)
		}
	}
	if n := pay.invoices(); n != 1 {
		t.Fatalf("alice paid %d invoices for five calls; want 1, the deposit", n)
	}
	st, ok := payer.Channel(ctx, pk.Key)
	if !ok || st.Nonce != 5 || st.Accumulated != 50_000 || st.Deposit != 80_000 {
		t.Fatalf("client's channel %+v (%v); want 5 receipts, 50000 of 80000 msat", st, ok)
	}
	closed, err := payer.CloseChannel(ctx, opts)
	if err != nil || closed.Owed != 30_000 {
		t.Fatalf("close: %+v %v; want 30000 msat refunded", closed, err)
	}
	if a, s := w.balances(t); a != 50_000 || s != 50_000 {
		t.Fatalf("after the refund: alice %d msat, srv %d msat; want 50000 and 50000 (five calls of 10 sats)", a, s)
	}
}

// A gateway offers no channels, and says why in its log, when its wallet
// may not pay_invoice (a receive-only connection: refunds could not be
// paid) and when told not to (--channels=false, payments.channels); it
// is still paid by invoice.
func TestGatewayChannel_NotOffered(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	_, receiveOnly := startWalletSim(t, c, "--relay", r.URL, "--wallet", "srv=0", "--methods", "make_invoice,lookup_invoice,get_info")
	_, full := startWalletSim(t, c, "--relay", r.URL, "--wallet", "srv=0")
	dir := t.TempDir()
	for _, tc := range []struct {
		name, wallet, config, why string
		flags                     []string
	}{
		{"receive-only wallet", receiveOnly.Wallets["srv"], "", "may not pay_invoice", nil},
		{"--channels=false", full.Wallets["srv"], "", "switched off", []string{"--channels=false"}},
		{"payments.channels", full.Wallets["srv"], "[payments]\nchannels = false\n", "switched off", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			if tc.config != "" {
				c.writeConfig(tc.config)
			}
			file := writeSecret(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".wallet", tc.wallet)
			args := append([]string{"gateway", "--relay", r.URL, "--announce", "--price", "tool:add=10", "--wallet-file", file}, tc.flags...)
			gw := startCVM(t, c, append(args, "--", demoServer(t))...)
			var ready gatewayReady
			gw.ReadyLine(t, &ready)
			pmis := announcedPMIs(t, r.URL, ready.Npub)
			if slices.Contains(pmis, channel.PMI) || !slices.Contains(pmis, payments.PMILightningBolt11) {
				t.Fatalf("announced pmis %v; want %s only", pmis, payments.PMILightningBolt11)
			}
			gw.Stderr.Await(t, 10*time.Second, "payment channels not offered", tc.why)
		})
	}
}

// The idle TTL comes from --channel-idle-ttl or payments.channel-idle-ttl,
// and a TTL below a second is refused before anything starts.
func TestGatewayChannel_IdleTTL(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	_, sim := startWalletSim(t, c, "--relay", r.URL, "--wallet", "srv=0")
	file := writeSecret(t, t.TempDir(), "srv.wallet", sim.Wallets["srv"])
	c.writeConfig("[payments]\nchannel-idle-ttl = \"36h\"\n")
	gw := startCVM(t, c, "gateway", "--relay", r.URL, "--price", "tool:add=10", "--wallet-file", file, "--", demoServer(t))
	var ready gatewayReady
	gw.ReadyLine(t, &ready)
	gw.Stderr.Await(t, 10*time.Second, "payment channels offered", "idle_ttl=36h0m0s")
	code, _, errOut := c.run("gateway", "--relay", r.URL, "--price", "tool:add=10", "--wallet-file", file, "--channel-idle-ttl", "10ms", "--", demoServer(t))
	if code == 0 || !strings.Contains(errOut, "--channel-idle-ttl 10ms") {
		t.Fatalf("--channel-idle-ttl 10ms: exit %d, %s", code, errOut)
	}
}

// A replica group (--nats) offers channels, their books in the group's
// bucket: a client pays three calls on one deposit on the replica that
// serves it; that replica is killed (kill -9), and the survivor accepts the
// channel's next receipts, where the first left off, and refunds what was
// not spent, once. Before, a replica group offered no channels.
func TestGatewayChannel_ReplicaGroupSharesTheBooks(t *testing.T) {
	ns := natstest.Start(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	_, sim := startWalletSim(t, c, "--relay", r.URL, "--wallet", "srv=0", "--wallet", "alice=100")
	dir := t.TempDir()
	file := writeSecret(t, dir, "srv.wallet", sim.Wallets["srv"])
	g := &replicaGroup{t: t, c: c, relay: r.URL, nats: ns.URL(), logPath: filepath.Join(dir, "exec.log")}
	for _, name := range []string{"r0", "r1"} {
		g.start(name, "--announce", "--price", "tool:work=10", "--wallet-file", file)
		g.procs[len(g.procs)-1].Stderr.Await(t, 10*time.Second, "payment channels offered")
	}
	g.awaitMembers(0, 2)
	g.awaitMembers(1, 2)
	if pmis := announcedPMIs(t, r.URL, g.ready[0].Npub); !slices.Contains(pmis, channel.PMI) {
		t.Fatalf("announced pmis %v; want %s", pmis, channel.PMI)
	}
	balances := func() (int64, int64) {
		return balanceOf(t, sim.Wallets["alice"]), balanceOf(t, sim.Wallets["srv"])
	}

	pay := newChannelPayer(t, sim.Wallets["alice"], 80)
	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	opts, payer, cs := pay.connect(ctx, t, g.ready[0].Pubkey, r.URL)
	for i := range 5 {
		if i == 3 {
			on := placements(t, g.logPath)["c"]
			owner := slices.Index([]string{"r0", "r1"}, on[0])
			if len(on) != 3 || owner < 0 || on[1] != on[0] || on[2] != on[0] {
				t.Fatalf("the first three calls ran on %v; want one replica", on)
			}
			g.procs[owner].Kill()
		}
		if err := callWork(ctx, cs, fmt.Sprintf("c-%d", i), 0); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if a, s := balances(); a != 20_000 || s != 80_000 {
			t.Fatalf("after call %d: alice %d msat, srv %d msat; want the 80-sat deposit moved once", i+1, a, s)
		}
	}
	if on := placements(t, g.logPath)["c"]; len(on) != 5 || on[3] == on[0] || on[4] != on[3] {
		t.Fatalf("the calls ran on %v; want the last two on the survivor", on)
	}
	if n := pay.invoices(); n != 1 {
		t.Fatalf("alice paid %d invoices for five calls; want 1, the deposit", n)
	}
	st, ok := payer.Channel(ctx, nostr.MustPubKeyFromHex(g.ready[0].Pubkey))
	if !ok || st.Nonce != 5 || st.Accumulated != 50_000 {
		t.Fatalf("client's channel %+v (%v); want 5 receipts, 50000 msat", st, ok)
	}
	closed, err := payer.CloseChannel(ctx, opts)
	if err != nil || closed.Owed != 30_000 {
		t.Fatalf("close: %+v %v; want 30000 msat refunded", closed, err)
	}
	if a, s := balances(); a != 50_000 || s != 50_000 {
		t.Fatalf("after the refund: alice %d msat, srv %d msat; want 50000 and 50000 (five calls of 10 sats)", a, s)
	}
	for rid, n := range executions(t, g.logPath) {
		if n != 1 {
			t.Errorf("%s ran %d times", rid, n)
		}
	}
}
