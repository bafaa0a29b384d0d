package cep8_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lnRail is the Lightning payment method through the simulator: an lnsim
// network with the wallets "srv" and "alice", served over Nostr Wallet
// Connect on relayURL, a processor receiving into srv and a handler paying
// from alice, each through its own NWC connection.
type lnRail struct {
	net     *lnsim.Network
	proc    *lightning.Processor
	handler *lightning.Handler
	// srvWallet and aliceWallet are the NWC clients of the two wallets:
	// the server's pays channel refunds, alice's invoices them.
	srvWallet, aliceWallet *nwc.Client
}

func newLNRail(tb testing.TB, relayURL string, aliceMsat int64) *lnRail {
	return newLNRailPoll(tb, relayURL, aliceMsat, lightning.ProcessorOptions{PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
}

// newLNRailPoll is newLNRail with the processor's options.
func newLNRailPoll(tb testing.TB, relayURL string, aliceMsat int64, popts lightning.ProcessorOptions) *lnRail {
	tb.Helper()
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	net.AddWallet("srv", 0)
	net.AddWallet("alice", aliceMsat)
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	tb.Cleanup(func() { pool.Close() })
	svc := nwc.NewService(net, pool, nwc.ServiceOptions{})
	srvURI, _ := svc.Connect("srv", nostr.Generate(), nostr.Generate())
	aliceURI, _ := svc.Connect("alice", nostr.Generate(), nostr.Generate())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	<-svc.Ready()
	srvWallet := nwc.NewClient(srvURI, nwc.ClientOptions{})
	tb.Cleanup(func() { srvWallet.Close() })
	aliceWallet := nwc.NewClient(aliceURI, nwc.ClientOptions{})
	tb.Cleanup(func() { aliceWallet.Close() })
	return &lnRail{
		net:         net,
		proc:        lightning.NewProcessor(srvWallet, popts),
		handler:     lightning.NewHandler(aliceWallet),
		srvWallet:   srvWallet,
		aliceWallet: aliceWallet,
	}
}

func (l *lnRail) balances(tb testing.TB) (alice, srv int64) {
	tb.Helper()
	alice, _ = l.net.Balance("alice")
	srv, _ = l.net.Balance("srv")
	return alice, srv
}

// A refused and a waived price, on the Lightning rail through the
// simulator and NWC: neither makes an invoice or moves a sat (the waived
// call runs, the refused one does not); a computed price moves exactly
// itself.
func TestPayLightning_WaivedRefusedAndComputed(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	ln := newLNRail(t, r.URL, 100_000)
	var invoices atomic.Int64
	stop := ln.net.OnSettle(func(lnsim.Settlement) { invoices.Add(1) })
	defer stop()
	p, _ := contextvm.ParsePrice("tool:echo=1-5")
	var runs atomic.Int64
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Prices: []contextvm.Price{p},
		Gate: cep8.NewGate(cep8.Options{Processors: []payments.Processor{ln.proc},
			Pricer: payments.PricerFunc(func(_ context.Context, r payments.PriceRequest) (payments.Quote, error) {
				var p struct {
					Arguments struct{ Text string } `json:"arguments"`
				}
				json.Unmarshal(r.Params, &p)
				switch p.Arguments.Text {
				case "free":
					return payments.Quote{Waive: true}, nil
				case "nope":
					return payments.Quote{}, payments.Refuse("not for you")
				}
				return payments.Quote{Amount: int64(len(p.Arguments.Text))}, nil
			})})}, peertest.CounterServer(&runs))
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		RequestTimeout: testwait.Timeout(20 * time.Second), Payer: (&cep8.PayOptions{Handlers: []payments.Handler{ln.handler}, Budget: &payments.Budget{PerCall: 5}}).Payer()})
	if res, err := peertest.Call(cs, "echo", map[string]any{"text": "free"}); err != nil || res.Content[0].(*mcp.TextContent).Text != "free" {
		t.Fatalf("waived: %v", err)
	}
	if _, err := peertest.Call(cs, "echo", map[string]any{"text": "nope"}); peertest.RPCCode(err) != contextvm.CodePriceRefused || !strings.Contains(err.Error(), "not for you") {
		t.Fatalf("refused: %v", err)
	}
	if a, s := ln.balances(t); a != 100_000 || s != 0 || invoices.Load() != 0 {
		t.Fatalf("after waived and refused: alice %d msat, srv %d msat, %d settlements", a, s, invoices.Load())
	}
	if res, err := peertest.Call(cs, "echo", map[string]any{"text": "abc"}); err != nil || res.Content[0].(*mcp.TextContent).Text != "abc" {
		t.Fatalf("computed price: %v", err)
	}
	if a, s := ln.balances(t); a != 97_000 || s != 3_000 || invoices.Load() != 1 {
		t.Fatalf("after a 3-sat call: alice %d msat, srv %d msat, %d settlements", a, s, invoices.Load())
	}
}

// BenchmarkPaidCallLightning measures a call through a relay on loopback,
// free and paid on the Lightning rail through the simulator: lnsim wallets
// served over NWC on the same relay, an invoice made (make_invoice), paid
// by the client (pay_invoice) and verified by the server (lookup_invoice)
// between payment_required and the result. "paid-notify" settles on the
// wallet's payment_received notification (NIP-47), the processor's
// default and what cvm gateway does with a wallet that sends them;
// "paid-poll-5ms" verifies with lookups only, from 5 ms backing off to
// 50 ms; "paid-default-poll" with lookups only at the processor's
// defaults (0.5 s backing off to 15 s), what cvm gateway does with a
// wallet that sends no notifications. "channel" pays each call with a
// receipt on a prepaid payment channel opened before the loop: no invoice,
// no wallet; its target is free's time plus a tenth.
func BenchmarkPaidCallLightning(b *testing.B) {
	for _, c := range []struct {
		name    string
		tool    string
		popts   lightning.ProcessorOptions
		channel bool
	}{
		{"free", "echo", lightning.ProcessorOptions{}, false},
		{"channel", "count", lightning.ProcessorOptions{}, true},
		{"paid-notify", "count", lightning.ProcessorOptions{}, false},
		{"paid-poll-5ms", "count", lightning.ProcessorOptions{PollOnly: true, PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond}, false},
		{"paid-default-poll", "count", lightning.ProcessorOptions{PollOnly: true}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
			ln := newLNRailPoll(b, r.URL, 1<<40, c.popts)
			p, _ := contextvm.ParsePrice("tool:count=1")
			var calls atomic.Int64
			sk := nostr.Generate()
			gopts := cep8.Options{Processors: []payments.Processor{ln.proc}}
			pay := &cep8.PayOptions{Handlers: []payments.Handler{ln.handler}, Budget: &payments.Budget{PerCall: 1}}
			if c.channel {
				pk := sk.Public()
				books, err := channel.New(channel.Options{Store: durable.NewMemory(durable.Options{}), ServerKey: pk[:],
					Refunder: channel.WalletRefunder{Wallet: ln.srvWallet}, Log: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				gopts.Channels = books
				pay.Channel = &cep8.ChannelOptions{DepositSats: 10_000_000}
			}
			srv := peertest.Serve(b, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Prices: []contextvm.Price{p},
				Signer: contextvm.NewKeySigner(sk), Gate: cep8.NewGate(gopts)}, peertest.CounterServer(&calls))
			cs := peertest.Connect(b, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
				Payer: pay.Payer()})
			var args map[string]any
			if c.tool == "echo" {
				args = map[string]any{"text": "x"}
			}
			if c.channel { // opens the channel, with the one invoice
				if res, err := peertest.Call(cs, c.tool, args); err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
			_, before := ln.balances(b)
			for b.Loop() {
				if res, err := peertest.Call(cs, c.tool, args); err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
			if c.tool == "count" && calls.Load() == 0 {
				b.Fatal("no paid call ran")
			}
			if _, after := ln.balances(b); c.channel && after != before {
				b.Fatalf("the server's wallet moved by %d msat during the calls on the channel; want nothing", after-before)
			}
		})
	}
}
