package cep8_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
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
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chanFixture is a relay, the Lightning rail through the simulator, and
// a server with key sk that charges 2 sats for count and offers channels,
// its books in a store of the test's choosing.
type chanFixture struct {
	relay    *relay.Server
	ln       *lnRail
	sk       nostr.SecretKey
	runs     atomic.Int64
	settled  atomic.Int64 // Lightning payments made in the simulator
	srv      *contextvm.Server
	books    *channel.Books
	clientSK nostr.SecretKey
	pricer   payments.Pricer // the gate's, if set
}

func newChanFixture(t *testing.T, aliceMsat int64) *chanFixture {
	f := &chanFixture{relay: relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}}), sk: nostr.Generate(), clientSK: nostr.Generate()}
	f.ln = newLNRail(t, f.relay.URL, aliceMsat)
	stop := f.ln.net.OnSettle(func(lnsim.Settlement) { f.settled.Add(1) })
	t.Cleanup(stop)
	return f
}

// serve starts the server over store (its State and its books).
func (f *chanFixture) serve(t *testing.T, store durable.Store) *contextvm.Server {
	t.Helper()
	return f.serveMCP(t, store, peertest.CounterServer(&f.runs))
}

// serveMCP is serve for mcpServer; slow costs 2 sats too.
func (f *chanFixture) serveMCP(t *testing.T, store durable.Store, mcpServer *mcp.Server) *contextvm.Server {
	t.Helper()
	pk := f.sk.Public()
	books, err := channel.New(channel.Options{Store: store, ServerKey: pk[:], Refunder: channel.WalletRefunder{Wallet: f.ln.srvWallet}})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := contextvm.ParsePrice("tool:count=2")
	slow, _ := contextvm.ParsePrice("tool:slow=2")
	echo, _ := contextvm.ParsePrice("tool:echo=2")
	f.books = books
	gate := cep8.NewGate(cep8.Options{Processors: []payments.Processor{f.ln.proc}, Channels: books, Pricer: f.pricer})
	f.srv = peertest.Serve(t, contextvm.ServerOptions{Relays: []string{f.relay.URL}, Encryption: contextvm.EncryptDisabled, Prices: []contextvm.Price{p, slow, echo},
		Signer: contextvm.NewKeySigner(f.sk), State: store, Gate: gate}, mcpServer)
	if !listsChannels(gate) {
		t.Fatal("a gate with channels does not list their pmi")
	}
	return f.srv
}

// clientOptions are those of alice's client, with key clientSK, paying
// with pay.
func (f *chanFixture) clientOptions(pay *cep8.PayOptions) contextvm.ClientOptions {
	return contextvm.ClientOptions{Server: f.sk.Public().Hex(), Relays: []string{f.relay.URL}, Encryption: contextvm.EncryptDisabled,
		Signer: contextvm.NewKeySigner(f.clientSK), RequestTimeout: testwait.Timeout(20 * time.Second), Payer: pay.Payer()}
}

// channelPay pays with a 50-sat channel, its state in store, 2 sats a call
// at most.
func (f *chanFixture) channelPay(store durable.Store) *cep8.PayOptions {
	return &cep8.PayOptions{Handlers: []payments.Handler{f.ln.handler}, Budget: &payments.Budget{PerCall: 2},
		Channel: &cep8.ChannelOptions{DepositSats: 50, Wallet: f.ln.aliceWallet, Store: store}}
}

func (f *chanFixture) count(t *testing.T, cs *mcp.ClientSession, n int) {
	t.Helper()
	for i := range n {
		if res, err := peertest.Call(cs, "count", nil); err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i+1, err, res)
		}
	}
}

func (f *chanFixture) wantBalances(t *testing.T, what string, alice, srv int64) {
	t.Helper()
	if a, s := f.ln.balances(t); a != alice || s != srv {
		t.Fatalf("%s: alice %d msat, srv %d msat; want %d and %d", what, a, s, alice, srv)
	}
}

// Five calls on a channel move alice's wallet once, by the deposit: the
// first opens it (an invoice for the deposit, the call its first
// receipt), the other four carry receipts and no invoice. Closing it
// refunds all but the five prices, to an invoice of alice's wallet, once.
func TestChannel_FiveCallsOneDepositCloseRefundsTheRest(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.serve(t, durable.NewMemory(durable.Options{}))
	pay := f.channelPay(nil)
	opts := f.clientOptions(pay)
	payer := opts.Payer.(*cep8.Payer)
	cs := peertest.Connect(t, opts)
	f.count(t, cs, 5)
	if f.runs.Load() != 5 || f.settled.Load() != 1 {
		t.Fatalf("%d runs, %d Lightning payments; want 5 runs on one payment", f.runs.Load(), f.settled.Load())
	}
	f.wantBalances(t, "after five calls", 50_000, 50_000)
	st, ok := payer.Channel(context.Background(), f.sk.Public())
	if !ok || st.Nonce != 5 || st.Accumulated != 10_000 || st.Deposit != 50_000 {
		t.Fatalf("client's channel %+v (%v); want 5 receipts, 10000 of 50000 msat", st, ok)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	closed, err := payer.CloseChannel(ctx, opts)
	if err != nil || closed.Owed != 40_000 {
		t.Fatalf("close: %+v %v; want 40000 msat refunded", closed, err)
	}
	f.wantBalances(t, "after the refund", 90_000, 10_000)
	// Closed: closing again pays nothing more (the channel is forgotten
	// by the client; the server's books say it is refunded).
	client := f.clientSK.Public()
	if s, err := f.books.Get(ctx, client[:], closed.Channel); err != nil || s.Refund != channel.RefundPaid {
		t.Fatalf("server's books: %+v %v; want the refund paid", s, err)
	}
	if _, err := payer.CloseChannel(ctx, opts); err == nil {
		t.Fatal("closed twice")
	}
	f.wantBalances(t, "after closing again", 90_000, 10_000)
	// The next call opens another channel.
	f.count(t, cs, 1)
	f.wantBalances(t, "after a call on a new channel", 40_000, 60_000)
}

// Free calls between paid ones on a channel (a tool with no price, whose
// request carries a receipt of nothing the server ignores) leave the
// client's receipts in step with the server's books: every paid call is
// sent once, none refused and sent again (before, each free call put the
// client one receipt ahead, and the next paid call was refused with
// RAV_CONFLICT and resent: two round trips a call).
func TestChannel_FreeCallsKeepReceiptsInStep(t *testing.T) {
	f := newChanFixture(t, 100_000)
	counter := peertest.CounterServer(&f.runs)
	mcp.AddTool(counter, &mcp.Tool{Name: "free"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "free"}}}, nil, nil
	})
	f.serveMCP(t, durable.NewMemory(durable.Options{}), counter)
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{f.relay.URL}})
	defer pool.Close()
	sub := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Authors: []nostr.PubKey{f.clientSK.Public()}}, 256)
	defer sub.Close()
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	select {
	case <-sub.Ready():
	case <-ctx.Done():
		t.Fatal("no subscription")
	}
	cs := peertest.Connect(t, f.clientOptions(f.channelPay(nil)))
	for i := range 4 {
		if res, err := peertest.Call(cs, "free", nil); err != nil || res.IsError {
			t.Fatalf("free call %d: %v %+v", i+1, err, res)
		}
		f.count(t, cs, 1)
	}
	if f.runs.Load() != 4 || f.settled.Load() != 1 {
		t.Fatalf("%d paid runs, %d Lightning payments; want 4 on one payment", f.runs.Load(), f.settled.Load())
	}
	// The first eight requests are the eight calls, in order: a paid call
	// refused and sent again would be among them (the second paid call's
	// resend is the sixth), with its JSON-RPC id twice.
	ids := map[string]bool{}
	for len(ids) < 8 {
		select {
		case evt := <-sub.Events():
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(evt.Content), &m) != nil || m.Method != "tools/call" {
				continue
			}
			if ids[string(m.ID)] {
				t.Fatalf("call %s was sent again after %d requests", m.ID, len(ids))
			}
			ids[string(m.ID)] = true
		case <-ctx.Done():
			t.Fatalf("%d of the 8 calls' requests seen", len(ids))
		}
	}
}

// A receipt on a call the server waives is not debited, and the answer
// carries the channel's state: the client's next receipt is the right one
// at once.
func TestChannel_WaivedCallTellsTheState(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.pricer = payments.PricerFunc(func(_ context.Context, r payments.PriceRequest) (payments.Quote, error) {
		return payments.Quote{Waive: r.Cap.Capability == "tool:echo", Amount: 2}, nil
	})
	f.serve(t, durable.NewMemory(durable.Options{}))
	opts := f.clientOptions(f.channelPay(nil))
	payer := opts.Payer.(*cep8.Payer)
	cs := peertest.Connect(t, opts)
	f.count(t, cs, 1)
	if peertest.CallEcho(t, cs, "free") != "free" {
		t.Fatal("echo")
	}
	if st, _ := payer.Channel(context.Background(), f.sk.Public()); st.Nonce != 1 || st.Accumulated != 2000 {
		t.Fatalf("client's state after a waived call %+v; want the server's, 1 receipt", st)
	}
	f.count(t, cs, 1)
	if f.runs.Load() != 2 || f.settled.Load() != 1 {
		t.Fatalf("%d runs, %d payments", f.runs.Load(), f.settled.Load())
	}
}

// When the deposit runs out, the call that would exceed it tops the
// channel up (an invoice for another deposit) and is its next receipt.
func TestChannel_TopUpWhenTheDepositRunsOut(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.serve(t, durable.NewMemory(durable.Options{}))
	pay := f.channelPay(nil)
	pay.Channel.DepositSats = 5
	opts := f.clientOptions(pay)
	cs := peertest.Connect(t, opts)
	f.count(t, cs, 4) // 2 + 2 on the first 5 sats, then a top-up of 5, then 2
	st, _ := opts.Payer.(*cep8.Payer).Channel(context.Background(), f.sk.Public())
	client := f.clientSK.Public()
	books, err := f.books.Get(context.Background(), client[:], st.Channel)
	if err != nil || books.Deposit != 10_000 || books.Accumulated != 8_000 || books.Nonce != 4 || f.runs.Load() != 4 || f.settled.Load() != 2 {
		t.Fatalf("books %+v %v, %d runs, %d payments; want 8000 of 10000 msat in 4 receipts, 2 payments", books, err, f.runs.Load(), f.settled.Load())
	}
	if st.Deposit != 10_000 || st.Accumulated != 8_000 {
		t.Fatalf("client's state %+v", st)
	}
	f.wantBalances(t, "after the top-up", 90_000, 10_000)
}

// A client with channels pays invoices, call by call, to a server that
// does not offer them.
func TestChannel_ServerWithoutChannelsIsPaidByInvoice(t *testing.T) {
	f := newChanFixture(t, 100_000)
	gate := cep8.NewGate(cep8.Options{Processors: []payments.Processor{f.ln.proc}})
	if listsChannels(gate) {
		t.Fatal("a gate without channels lists their pmi")
	}
	f.invoicedTwice(t, gate)
}

// invoicedTwice serves count (2 sats) behind gate, which keeps no books,
// and checks that a client paying over channels makes two calls on two
// invoices and holds no channel after them.
func (f *chanFixture) invoicedTwice(t *testing.T, gate contextvm.Gate) {
	t.Helper()
	p, _ := contextvm.ParsePrice("tool:count=2")
	peertest.Serve(t, contextvm.ServerOptions{Relays: []string{f.relay.URL}, Encryption: contextvm.EncryptDisabled, Prices: []contextvm.Price{p},
		Signer: contextvm.NewKeySigner(f.sk), Gate: gate}, peertest.CounterServer(&f.runs))
	opts := f.clientOptions(f.channelPay(nil))
	cs := peertest.Connect(t, opts)
	f.count(t, cs, 2)
	if f.runs.Load() != 2 || f.settled.Load() != 2 {
		t.Fatalf("%d runs, %d Lightning payments; want 2 and 2", f.runs.Load(), f.settled.Load())
	}
	f.wantBalances(t, "after two calls", 96_000, 4_000)
	if _, ok := opts.Payer.(*cep8.Payer).Channel(context.Background(), f.sk.Public()); ok {
		t.Fatal("a channel with a server that opened none")
	}
}

// staleChannels is a gate without channels that still lists their pmi,
// as a server that offered them before a restart with them switched off
// looks to a client that learnt of it then.
type staleChannels struct{ *cep8.Gate }

func (g staleChannels) Tags() nostr.Tags {
	return append(g.Gate.Tags(), nostr.Tag{contextvm.TagPMI, channel.PMI})
}

func (g staleChannels) Session() contextvm.GateSession { return staleSession{g.Gate.Session()} }

type staleSession struct{ contextvm.GateSession }

func (s staleSession) Tags() nostr.Tags {
	return append(s.GateSession.Tags(), nostr.Tag{contextvm.TagPMI, channel.PMI})
}

// A server that lists channels and ignores the request to open one asks
// for the call's price: the client pays it as any price, within its
// budget, and the call runs (before, the client took it for a deposit
// of the wrong amount and declined it).
func TestChannel_IgnoredOpenIsPaidAsThePrice(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.invoicedTwice(t, staleChannels{cep8.NewGate(cep8.Options{Processors: []payments.Processor{f.ln.proc}})})
}

func listsChannels(g *cep8.Gate) bool {
	return slices.ContainsFunc(g.Tags(), func(t nostr.Tag) bool { return len(t) == 2 && t[0] == contextvm.TagPMI && t[1] == channel.PMI })
}

// A client without channels still pays invoices, call by call, to a
// server that offers them.
func TestChannel_ClientWithoutChannelsPaysInvoices(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.serve(t, durable.NewMemory(durable.Options{}))
	pay := &cep8.PayOptions{Handlers: []payments.Handler{f.ln.handler}, Budget: &payments.Budget{PerCall: 2}}
	cs := peertest.Connect(t, f.clientOptions(pay))
	f.count(t, cs, 2)
	if f.runs.Load() != 2 || f.settled.Load() != 2 {
		t.Fatalf("%d runs, %d Lightning payments; want 2 and 2", f.runs.Load(), f.settled.Load())
	}
	f.wantBalances(t, "after two calls", 96_000, 4_000)
}

// A channel's deposit counts against the budget's daily limits: one
// above what is left of them is declined (-32017, over-daily), the call
// does not run and nothing moves; the next call asks for the deposit
// again, not for its price alone.
func TestChannel_DepositCountsAgainstDailyLimit(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.serve(t, durable.NewMemory(durable.Options{}))
	pay := f.channelPay(nil)
	pay.Budget.PerDay = 40
	cs := peertest.Connect(t, f.clientOptions(pay))
	for range 2 {
		_, err := peertest.Call(cs, "count", nil)
		if d, ok := contextvm.Declined(err); !ok || d.Reason != contextvm.DeclinedOverDaily || d.Amount != 50 {
			t.Fatalf("a 50-sat deposit on a 40-sat day: %v", err)
		}
	}
	if f.runs.Load() != 0 {
		t.Fatalf("%d runs; want none", f.runs.Load())
	}
	f.wantBalances(t, "after the declined deposit", 100_000, 0)
}

// The server's channel survives its restart (the store reopened from
// disk), and so does the client's (its own store): calls after the
// restart carry receipts, with no invoice.
func TestChannel_SurvivesServerRestart(t *testing.T) {
	f := newChanFixture(t, 100_000)
	dir := t.TempDir()
	open := func() *durable.File {
		st, err := durable.Open(dir, "server", durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	store := open()
	f.serve(t, store)
	clientStore := durable.NewMemory(durable.Options{})
	cs := peertest.Connect(t, f.clientOptions(f.channelPay(clientStore)))
	f.count(t, cs, 2)
	cs.Close()
	f.srv.Close()
	store.Close()

	store = open()
	t.Cleanup(func() { store.Close() })
	f.serve(t, store)
	opts := f.clientOptions(f.channelPay(clientStore)) // a new client process, its state from the store
	cs = peertest.Connect(t, opts)
	f.count(t, cs, 3)
	if f.runs.Load() != 5 || f.settled.Load() != 1 {
		t.Fatalf("%d runs, %d Lightning payments; want 5 runs on one payment", f.runs.Load(), f.settled.Load())
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if closed, err := opts.Payer.(*cep8.Payer).CloseChannel(ctx, opts); err != nil || closed.Owed != 40_000 {
		t.Fatalf("close: %+v %v", closed, err)
	}
	f.wantBalances(t, "after the refund", 90_000, 10_000)
}

// Calls sent at once on one channel: each runs once paid, or is told to
// send again (-32050); the channel is debited once per run, never more,
// and no call runs unpaid.
func TestChannel_ConcurrentCallsNeverDebitTwice(t *testing.T) {
	f := newChanFixture(t, 100_000)
	f.serve(t, durable.NewMemory(durable.Options{}))
	opts := f.clientOptions(f.channelPay(nil))
	cs := peertest.Connect(t, opts)
	f.count(t, cs, 1) // opens
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for range 4 {
		wg.Go(func() {
			res, err := peertest.Call(cs, "count", nil)
			switch {
			case err == nil && !res.IsError:
				ok.Add(1)
			case peertest.RPCCode(err) == cep8.CodeChannelRefused:
				refused.Add(1)
			default:
				t.Errorf("concurrent call: %v %+v", err, res)
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls ran, %d were told to send again", ok.Load(), refused.Load())
	client := f.clientSK.Public()
	st, _ := opts.Payer.(*cep8.Payer).Channel(context.Background(), f.sk.Public())
	books, err := f.books.Get(context.Background(), client[:], st.Channel)
	if err != nil {
		t.Fatal(err)
	}
	runs := f.runs.Load()
	if runs != 1+ok.Load() || books.Accumulated != uint64(runs)*2000 || books.Nonce != uint64(runs) || f.settled.Load() != 1 {
		t.Fatalf("%d runs (%d ok, %d told to resend), books %d msat in %d receipts, %d payments; want one 2000-msat receipt per run, one payment",
			runs, ok.Load(), refused.Load(), books.Accumulated, books.Nonce, f.settled.Load())
	}
}

// A receipt that is not the channel's next (another nonce, another
// amount, above the deposit, an unknown channel) is answered -32050 with
// the channel's state and runs nothing; the next receipt made from that
// state runs. Spoken by hand, on the wire.
func TestChannel_RefusedReceiptRunsNothing(t *testing.T) {
	f := newChanFixture(t, 100_000)
	srv := f.serve(t, durable.NewMemory(durable.Options{}))
	peer := peertest.NewRawPeer(t, f.relay.URL)
	peer.Initialize(srv.PublicKey())
	send := func(id int, tags ...nostr.Tag) map[string]json.RawMessage {
		t.Helper()
		return f.rawCall(t, peer, peer.Message(srv.PublicKey(), fmt.Sprintf(countCall, id), tags...))
	}
	st := f.rawOpen(t, peer, send(1, nostr.Tag{cep8.TagChannelOpen, "10000"}))
	if f.runs.Load() != 1 {
		t.Fatalf("%d runs of the opening call", f.runs.Load())
	}
	bad := map[string]func(r *channel.SubRAV){
		"nonce skipped":       func(r *channel.SubRAV) { r.Nonce++ },
		"amount short":        func(r *channel.SubRAV) { r.AccumulatedAmount-- },
		"above the deposit":   func(r *channel.SubRAV) { r.AccumulatedAmount = 12_000 },
		"another epoch":       func(r *channel.SubRAV) { r.ChannelEpoch = 1 },
		"the last one again":  func(r *channel.SubRAV) { r.Nonce, r.AccumulatedAmount = 1, 2000 },
		"an unknown channel":  func(r *channel.SubRAV) { r.ChannelID[0] ^= 1 },
		"another fragment":    func(r *channel.SubRAV) { r.VMIDFragment = "key-1" },
		"another chain":       func(r *channel.SubRAV) { r.ChainID = 4 },
		"the first one again": func(r *channel.SubRAV) { r.Nonce, r.AccumulatedAmount = 0, 0 },
	}
	id := 2
	for name, mangle := range bad {
		r, _ := st.Next(2000)
		mangle(&r)
		tag, _ := channel.Tag(r)
		m := send(id, tag)
		id++
		var e jsonrpc.Error
		json.Unmarshal(m["error"], &e)
		if e.Code != cep8.CodeChannelRefused {
			t.Fatalf("%s: %s", name, m["error"])
		}
		p, err := channel.UnmarshalPayload(e.Data)
		if err != nil || p.Error == nil {
			t.Fatalf("%s: data %s", name, e.Data)
		}
		if name != "an unknown channel" {
			if got := stateOf(t, e.Data); got.Nonce != 1 || got.Accumulated != 2000 {
				t.Fatalf("%s: state %+v", name, got)
			}
		}
	}
	if f.runs.Load() != 1 {
		t.Fatalf("%d runs after refused receipts; want 1", f.runs.Load())
	}
	r, _ := st.Next(2000)
	tag, _ := channel.Tag(r)
	if m := send(id, tag); m["result"] == nil || f.runs.Load() != 2 {
		t.Fatalf("the next receipt: %s, %d runs", m["error"], f.runs.Load())
	}
	if f.settled.Load() != 1 {
		t.Fatalf("%d Lightning payments; want the deposit only", f.settled.Load())
	}
	// Two receipt tags, a receipt and an open: refused as malformed.
	r2, _ := st.Next(4000)
	tag2, _ := channel.Tag(r2)
	for _, tags := range [][]nostr.Tag{{tag, tag2}, {tag2, {cep8.TagChannelOpen, "10000"}}, {{cep8.TagChannelOpen, "10500"}}, {{cep8.TagChannelOpen, "1000"}}} {
		m := send(id, tags...)
		id++
		var e jsonrpc.Error
		json.Unmarshal(m["error"], &e)
		if e.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("tags %v: %s", tags, m["error"])
		}
	}
	if f.runs.Load() != 2 {
		t.Fatalf("%d runs after malformed channel tags; want 2", f.runs.Load())
	}
}

const countCall = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"count","arguments":{}}}`

// rawCall publishes req from peer and returns its answer, paying any
// payment asked for from alice's wallet meanwhile.
func (f *chanFixture) rawCall(t *testing.T, peer *peertest.RawPeer, req nostr.Event) map[string]json.RawMessage {
	t.Helper()
	peer.Publish(req)
	for {
		_, m := peertest.NextMessage(t, peer)
		if peertest.Method(m) == contextvm.MethodPaymentRequired {
			pr, _, err := contextvm.ParsePaymentRequired(m["params"])
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := testwait.Context(t, 20*time.Second)
			_, err = f.ln.handler.Pay(ctx, pr, pr.Amount)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if m["id"] != nil {
			return m
		}
	}
}

// rawOpen reads the answer m to a channel_open of 10 sats on a 2-sat call:
// the state of a channel debited once.
func (f *chanFixture) rawOpen(t *testing.T, peer *peertest.RawPeer, m map[string]json.RawMessage) channel.State {
	t.Helper()
	var res struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m["result"], &res); err != nil || res.Meta[cep8.MetaChannel] == nil {
		t.Fatalf("open: %s %s", m["result"], m["error"])
	}
	st := stateOf(t, res.Meta[cep8.MetaChannel])
	if st.Nonce != 1 || st.Accumulated != 2000 || st.Deposit != 10_000 {
		t.Fatalf("opened %+v", st)
	}
	return st
}

// A call paid by a receipt that was accepted, whose server stopped while
// it ran, is answered -32015 when it is replayed after the restart: the
// receipt stands, debited once, and the call is not run again.
func TestChannel_CrashAfterAcceptedReceiptAnswersPaidResultLost(t *testing.T) {
	f := newChanFixture(t, 100_000)
	dir := t.TempDir()
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	var slowRuns atomic.Int64
	mcpServer := func() *mcp.Server {
		s := peertest.CounterServer(&f.runs)
		mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			slowRuns.Add(1)
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{}, nil, nil
		})
		return s
	}
	start := func() *durable.File {
		st, err := durable.Open(dir, "server", durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f.serveMCP(t, st, mcpServer())
		return st
	}
	store := start()
	peer := peertest.NewRawPeer(t, f.relay.URL)
	peer.Initialize(f.srv.PublicKey())
	st := f.rawOpen(t, peer, f.rawCall(t, peer, peer.Message(f.srv.PublicKey(), fmt.Sprintf(countCall, 1), nostr.Tag{cep8.TagChannelOpen, "10000"})))
	r, _ := st.Next(2000)
	tag, _ := channel.Tag(r)
	req := peer.Message(f.srv.PublicKey(), `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"slow","arguments":{}}}`, tag)
	peer.Publish(req)
	<-started
	f.srv.Close() // answers the call "server shutting down"
	store.Close()
	store = start()
	defer store.Close()
	for {
		_, m := peertest.NextMessage(t, peer)
		if peertest.Method(m) == "" && strings.Contains(string(m["error"]), "shutting down") {
			break
		}
	}
	peer.Publish(req)
	_, m := peertest.NextMessage(t, peer)
	var e jsonrpc.Error
	json.Unmarshal(m["error"], &e)
	if e.Code != contextvm.CodePaidResultLost {
		t.Fatalf("replay after a crash answered %s %s", m["result"], m["error"])
	}
	client := peer.SK.Public()
	if got, err := f.books.Get(context.Background(), client[:], st.Channel); err != nil || got.Nonce != 2 || got.Accumulated != 4000 {
		t.Fatalf("books after the crash: %+v %v; want the receipt accepted once", got, err)
	}
	if slowRuns.Load() != 1 || f.settled.Load() != 1 {
		t.Fatalf("slow ran %d times, %d Lightning payments", slowRuns.Load(), f.settled.Load())
	}
}

func stateOf(t *testing.T, raw json.RawMessage) channel.State {
	t.Helper()
	p, err := channel.UnmarshalPayload(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, err := channel.StateOf(&p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
