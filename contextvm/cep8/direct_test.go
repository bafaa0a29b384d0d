package cep8_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// countingRedeemer is the fake cash redeemer, counting the payloads it
// redeemed, and holding each redemption until hold is closed, when set.
type countingRedeemer struct {
	*payments.FakeRedeemer
	calls    atomic.Int64 // Redeem called
	redeemed atomic.Int64
	entered  chan struct{} // told when a redemption begins, when set
	hold     chan struct{}
}

func (r *countingRedeemer) Redeem(ctx context.Context, c payments.Charge, payload string) (payments.Redeemed, error) {
	r.calls.Add(1)
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.hold != nil {
		<-r.hold
	}
	red, err := r.FakeRedeemer.Redeem(ctx, c, payload)
	if err == nil {
		r.redeemed.Add(1)
	}
	return red, err
}

// slowKeeper is a wallet slow to keep change, as one that swaps it at its
// mint is.
type slowKeeper struct{ *payments.FakeWallet }

func (w slowKeeper) KeepChange(ctx context.Context, payload string) (int64, error) {
	// Pacing under test: the call must not return before the change is
	// kept, however long that takes.
	time.Sleep(300 * time.Millisecond)
	return w.FakeWallet.KeepChange(ctx, payload)
}

// directFixture is a PayFixture whose server also takes fake cash of mint
// "m", kept in srv.
type directFixture struct {
	*peertest.PayFixture
	mint *payments.FakeMint
	srv  *payments.FakeWallet
	r    *countingRedeemer
}

func newDirectFixture(t *testing.T, fee int64) *directFixture {
	mint := payments.NewFakeMint("m")
	srv := payments.NewFakeWallet(mint)
	return &directFixture{PayFixture: peertest.NewPayFixture(t, 100), mint: mint, srv: srv,
		r: &countingRedeemer{FakeRedeemer: &payments.FakeRedeemer{Mint: mint, Payee: srv, Fee: fee}}}
}

// serverOptions charge prices (tool:count=10 when none) with the fake
// cash redeemer and, when invoices, the fake processor.
func (f *directFixture) serverOptions(invoices bool, prices ...string) contextvm.ServerOptions {
	opts := f.ServerOptions(0, prices...)
	gate := cep8.Options{Redeemers: []payments.Redeemer{f.r}}
	if invoices {
		gate.Processors = f.GateOptions(0).Processors
	}
	opts.Gate = cep8.NewGate(gate)
	return opts
}

// payload is a fake cash payload of a new note worth value.
func (f *directFixture) payload(t *testing.T, value int64) string {
	t.Helper()
	p, err := payments.NewFakeWallet(f.mint, value).Prepare(context.Background(), value, value, "")
	if err != nil {
		t.Fatal(err)
	}
	return p.Payload
}

// unspent reports whether payload's notes are unspent (a wallet takes
// them back).
func (f *directFixture) unspent(payload string) bool {
	return payments.NewFakeWallet(f.mint).Restore(context.Background(), payload) == nil
}

func directTag(payload string) nostr.Tag {
	return nostr.Tag{cep8.TagDirectPayment, payments.PMIFakeCash, payload}
}

// peerMsg is a message the server sent a raw peer.
type peerMsg struct {
	evt nostr.Event
	m   map[string]json.RawMessage
}

func (p peerMsg) method() string { return peertest.Method(p.m) }

func (p peerMsg) change() string {
	for _, t := range p.evt.Tags {
		if len(t) == 3 && t[0] == cep8.TagChange && t[1] == payments.PMIFakeCash {
			return t[2]
		}
	}
	return ""
}

// readUntil reads the peer's messages up to and including the first for
// which stop holds.
func readUntil(t *testing.T, peer *peertest.RawPeer, stop func(peerMsg) bool) []peerMsg {
	t.Helper()
	var got []peerMsg
	for {
		evt, m := peertest.NextMessage(t, peer)
		msg := peerMsg{evt, m}
		got = append(got, msg)
		if stop(msg) {
			return got
		}
	}
}

func isAnswer(p peerMsg) bool { return p.method() == "" }

func methods(msgs []peerMsg) string {
	var out []string
	for _, p := range msgs {
		if m := p.method(); m != "" {
			out = append(out, strings.TrimPrefix(m, "notifications/"))
		} else if p.m["error"] != nil {
			out = append(out, "error "+string(p.m["error"]))
		} else {
			out = append(out, "result")
		}
	}
	return strings.Join(out, ", ")
}

var countSeven = fmt.Sprintf(countCall, 7)

// A cvm client that knows the price pays it in the request itself: one
// round trip, no invoice; the server keeps exactly the price, the change
// is back in the client's wallet when the call returns, and the budget
// counts the price only.
func TestDirect_GoClientPaysInTheRequest(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	wallet := payments.NewFakeWallet(f.mint, 4, 16)
	budget := &payments.Budget{PerCall: 20}
	var rep reports
	cs := f.Client(t, srv, &cep8.PayOptions{
		Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Bearers:  []payments.Bearer{slowKeeper{wallet}},
		Budget:   budget,
		Report:   rep.add,
	})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := peertest.Call(cs, "count", nil)
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "1" {
		t.Fatalf("paid call: %v %v", res, err)
	}
	if w, s := wallet.Balance(), f.srv.Balance(); w != 10 || s != 10 {
		t.Fatalf("as the call returns the client holds %d, the server %d; want 10 and 10", w, s)
	}
	if a, s := f.Balances(t); a != 100 || s != 0 {
		t.Fatalf("an invoice was paid: alice %d, srv %d", a, s)
	}
	if spent, _, _ := budget.Spent(ctx, srv.PublicKey().Hex()); spent != 10 {
		t.Fatalf("the budget counts %d spent; want 10", spent)
	}
	if paid, accepted := rep.count(func(p contextvm.PaymentReport) bool { return p.Paid && !p.Accepted && p.PMI == payments.PMIFakeCash }),
		rep.count(func(p contextvm.PaymentReport) bool { return p.Accepted }); paid != 1 || accepted != 1 {
		t.Fatalf("%d paid and %d accepted reports; want 1 and 1: %+v", paid, accepted, rep.all)
	}
}

// slowAcceptSigner is a server's signer that holds the signing of
// payment_accepted until the paid tool has run (or 10 s have passed),
// and tells whether it had.
type slowAcceptSigner struct {
	*contextvm.KeySigner
	ran       func() bool
	ranBefore atomic.Bool
}

func (s *slowAcceptSigner) SignEvent(ctx context.Context, evt *nostr.Event) error {
	if strings.Contains(evt.Content, contextvm.MethodPaymentAccepted) {
		s.ranBefore.Store(testwait.Until(ctx, 10*time.Second, s.ran))
	}
	return s.KeySigner.SignEvent(ctx, evt)
}

// payment_accepted is sent while the paid request runs, not before it
// (sealing it and waiting for the relay's OK cost as much as a short
// call), and still reaches the client before the answer, with the
// change.
func TestDirect_AcceptedSentWhileTheRequestRuns(t *testing.T) {
	f := newDirectFixture(t, 0)
	opts := f.serverOptions(false)
	signer := &slowAcceptSigner{KeySigner: contextvm.NewKeySigner(nostr.Generate()), ran: func() bool { return f.Calls.Load() > 0 }}
	opts.Signer = signer
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	peer.Publish(peer.Message(srv.PublicKey(), countSeven, directTag(f.payload(t, 16))))
	got := readUntil(t, peer, isAnswer)
	if methods(got) != "payment_accepted, result" || got[0].change() == "" {
		t.Fatalf("answered %s; want payment_accepted with change, then the result", methods(got))
	}
	if !signer.ranBefore.Load() {
		t.Fatal("the request ran only after payment_accepted went out")
	}
}

// A payment of exactly the price gets no payment_accepted: the result
// says it was taken. The Go client counts it paid, once, as the call
// returns: its wallet and its budget down by the price, nothing given
// back to the wallet.
func TestDirect_ExactPaymentTheResultSaysItWasTaken(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	payload := f.payload(t, 10)
	peer.Publish(peer.Message(srv.PublicKey(), countSeven, directTag(payload)))
	if got := readUntil(t, peer, isAnswer); methods(got) != "result" {
		t.Fatalf("answered %s; want the result alone", methods(got))
	}
	if f.unspent(payload) || f.srv.Balance() != 10 {
		t.Fatalf("the payload is unspent: %v; the server holds %d", f.unspent(payload), f.srv.Balance())
	}

	wallet := payments.NewFakeWallet(f.mint, 10, 10)
	budget := &payments.Budget{PerCall: 20}
	var rep reports
	cs := f.Client(t, srv, &cep8.PayOptions{Bearers: []payments.Bearer{wallet}, Budget: budget, Report: rep.add})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := peertest.Call(cs, "count", nil); err != nil || res.IsError {
		t.Fatalf("paid call: %v %v", res, err)
	}
	if w, s := wallet.Balance(), f.srv.Balance(); w != 10 || s != 20 {
		t.Fatalf("as the call returns the client holds %d, the server %d; want 10 and 20", w, s)
	}
	if spent, _, _ := budget.Spent(ctx, srv.PublicKey().Hex()); spent != 10 {
		t.Fatalf("the budget counts %d spent; want 10", spent)
	}
	paid := rep.count(func(p contextvm.PaymentReport) bool {
		return p.Paid && !p.Accepted && p.Amount == 10 && p.PMI == payments.PMIFakeCash
	})
	if accepted := rep.count(func(p contextvm.PaymentReport) bool { return p.Accepted }); paid != 1 || accepted != 1 {
		t.Fatalf("%d paid and %d accepted reports; want 1 and 1: %+v", paid, accepted, rep.all)
	}
}

// A payment sent with a request the server does not price (the client's
// prices are out of date) is said not taken before the answer, and stays
// the client's: an answer without word of it would say it was taken.
func TestDirect_UnpricedRequestPaymentNotTaken(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	payload := f.payload(t, 10)
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, directTag(payload)))
	if got := readUntil(t, peer, isAnswer); methods(got) != "payment_rejected, result" {
		t.Fatalf("answered %s; want payment_rejected, then the result", methods(got))
	}
	if !f.unspent(payload) || f.r.calls.Load() != 0 {
		t.Fatalf("the payload of an unpriced request was taken (%d redemptions)", f.r.calls.Load())
	}
}

// A direct payment the server cannot take is rejected, not consumed, and
// the request goes on in the normal flow: a forged, a foreign mint's, an
// empty, an insufficient (the amount required said) payload.
func TestDirect_RejectedNotConsumedThenNormalFlow(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	foreign, err := payments.NewFakeWallet(payments.NewFakeMint("other"), 50).Prepare(context.Background(), 50, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, payload string
		required      string
	}{
		{"insufficient", f.payload(t, 5), "10"},
		{"forged", payments.FakeCashPayload("m", "00112233"), ""},
		{"foreign mint", foreign.Payload, ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := peertest.NewRawPeer(t, f.Relay.URL)
			peer.Initialize(srv.PublicKey())
			peer.Publish(peer.Message(srv.PublicKey(), countSeven, directTag(tc.payload)))
			got := readUntil(t, peer, func(p peerMsg) bool { return p.method() == contextvm.MethodPaymentRequired || isAnswer(p) })
			if len(got) != 2 || got[0].method() != contextvm.MethodPaymentRejected {
				t.Fatalf("answered %s; want payment_rejected, payment_required", methods(got))
			}
			var params struct {
				PMI     string          `json:"pmi"`
				Amount  json.RawMessage `json:"amount"`
				Message string          `json:"message"`
			}
			json.Unmarshal(got[0].m["params"], &params)
			if params.PMI != payments.PMIFakeCash || string(params.Amount) != tc.required || params.Message == "" {
				t.Fatalf("payment_rejected %s", got[0].m["params"])
			}
			if pr, _, _ := contextvm.ParsePaymentRequired(got[1].m["params"]); pr.PMI != payments.PMIFake || pr.Amount != 10 {
				t.Fatalf("payment_required %s", got[1].m["params"])
			}
		})
	}
	if f.r.redeemed.Load() != 0 || f.srv.Balance() != 0 || f.Calls.Load() != 0 {
		t.Fatalf("%d redeemed, the server holds %d, %d runs", f.r.redeemed.Load(), f.srv.Balance(), f.Calls.Load())
	}
}

// The insufficient payload of a rejection stays the client's.
func TestDirect_InsufficientPayloadStaysUnspent(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	payload := f.payload(t, 9)
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	peer.Publish(peer.Message(srv.PublicKey(), countSeven, directTag(payload)))
	got := readUntil(t, peer, func(p peerMsg) bool { return p.method() == contextvm.MethodPaymentRequired || isAnswer(p) })
	if got[0].method() != contextvm.MethodPaymentRejected || !f.unspent(payload) {
		t.Fatalf("answered %s; the payload unspent: %v", methods(got), f.unspent(payload))
	}
}

// Of several direct_payment tags the first whose PMI the server takes is
// used, and only it; a PMI the server does not take is ignored, not
// rejected.
func TestDirect_FirstSupportedTagUsedForeignPMIIgnored(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	first, second := f.payload(t, 10), f.payload(t, 10)
	other := nostr.Tag{cep8.TagDirectPayment, "bitcoin-other-direct", "junk"}
	peer.Publish(peer.Message(srv.PublicKey(), countSeven, other, directTag(first), directTag(second)))
	got := readUntil(t, peer, isAnswer)
	if methods(got) != "result" { // paid exactly: no payment_accepted, the result says it
		t.Fatalf("answered %s", methods(got))
	}
	if f.unspent(first) || !f.unspent(second) || f.srv.Balance() != 10 {
		t.Fatalf("first unspent %v, second unspent %v, server holds %d", f.unspent(first), f.unspent(second), f.srv.Balance())
	}
	peer.Publish(peer.Message(srv.PublicKey(), countSeven, other))
	if got := readUntil(t, peer, func(p peerMsg) bool { return p.method() == contextvm.MethodPaymentRequired || isAnswer(p) }); methods(got) != "payment_required" {
		t.Fatalf("only a foreign PMI: answered %s", methods(got))
	}
}

// A direct-paid request event replayed, before and after a restart, is
// answered from its records: the same acceptance with the same change,
// the same result; its payload is redeemed once and the tool runs once.
func TestDirect_ReplayAnsweredFromRecordNotRedeemedTwice(t *testing.T) {
	f := newDirectFixture(t, 0)
	dir, sk := t.TempDir(), nostr.Generate()
	start := func() (*contextvm.Server, *durable.File) {
		state, err := durable.Open(dir, sk.Public().Hex(), durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.serverOptions(true)
		opts.Signer, opts.State, opts.Encryption = contextvm.NewKeySigner(sk), state, contextvm.EncryptOptional
		return peertest.Serve(t, opts, peertest.CounterServer(&f.Calls)), state
	}
	srv, state := start()
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	req := peer.Message(srv.PublicKey(), countSeven, directTag(f.payload(t, 16)))
	peer.Publish(req)
	first := readUntil(t, peer, isAnswer)
	if methods(first) != "payment_accepted, result" || first[0].change() == "" {
		t.Fatalf("answered %s", methods(first))
	}
	replay := func(when string) {
		t.Helper()
		// An ephemeral wrap: a stored one would come to the restarted
		// server again from the relay, and be answered twice.
		wrap, err := contextvm.Wrap(req, srv.PublicKey(), contextvm.KindEphemeralGiftWrap)
		if err != nil {
			t.Fatal(err)
		}
		peer.Publish(wrap)
		got := readUntil(t, peer, isAnswer)
		if methods(got) != "payment_accepted, result" || got[0].change() != first[0].change() ||
			string(got[1].m["result"]) != string(first[1].m["result"]) {
			t.Fatalf("replay %s answered %s", when, methods(got))
		}
	}
	replay("before the restart")
	srv.Close()
	state.Close()
	srv, state = start()
	defer state.Close()
	defer srv.Close()
	replay("after the restart")
	if f.r.redeemed.Load() != 1 || f.Calls.Load() != 1 || f.srv.Balance() != 10 {
		t.Fatalf("%d redeemed, %d runs, the server holds %d; want 1, 1, 10", f.r.redeemed.Load(), f.Calls.Load(), f.srv.Balance())
	}
	if v, err := payments.NewFakeWallet(f.mint).KeepChange(context.Background(), first[0].change()); err != nil || v != 6 {
		t.Fatalf("the change: %d %v", v, err)
	}
}

// A server that stops after redeeming a direct payment, before the call's
// answer, answers its replay after the restart -32015, paid, result lost:
// the payment kept, the tool not run again, the payload not redeemed
// again.
func TestDirect_CrashAfterRedemptionReplayGetsResultLost(t *testing.T) {
	f := newDirectFixture(t, 0)
	dir, sk := t.TempDir(), nostr.Generate()
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	start := func() (*contextvm.Server, *durable.File) {
		state, err := durable.Open(dir, sk.Public().Hex(), durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.serverOptions(true, "tool:wait=10")
		opts.Signer, opts.State = contextvm.NewKeySigner(sk), state
		return peertest.Serve(t, opts, peertest.SlowServer(release, started)), state
	}
	srv, state := start()
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	req := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"wait","arguments":{}}}`, directTag(f.payload(t, 10)))
	peer.Publish(req)
	<-started
	srv.Close()
	state.Close()
	readUntil(t, peer, func(p peerMsg) bool { return strings.Contains(string(p.m["error"]), "shutting down") })
	srv, state = start()
	defer state.Close()
	defer srv.Close()
	peer.Publish(req)
	got := readUntil(t, peer, isAnswer)
	var e jsonrpc.Error
	json.Unmarshal(got[len(got)-1].m["error"], &e)
	// No result says the payment was taken: payment_accepted does.
	if e.Code != contextvm.CodePaidResultLost || !strings.Contains(e.Message, "paid, result lost") || methods(got[len(got)-2:len(got)-1]) != "payment_accepted" {
		t.Fatalf("replay after the crash answered %s", methods(got))
	}
	if f.r.redeemed.Load() != 1 || f.srv.Balance() != 10 || len(started) != 0 {
		t.Fatalf("%d redeemed, the server holds %d, ran again: %v", f.r.redeemed.Load(), f.srv.Balance(), len(started) != 0)
	}
}

// Change whose payment_accepted reaches no one (the client went away
// while its payment was redeemed) is kept by the server and sent on the
// client's next request, about the request that paid, once.
func TestDirect_ChangeKeptForAGoneClientSentOnItsNextContact(t *testing.T) {
	f := newDirectFixture(t, 0)
	f.r.entered, f.r.hold = make(chan struct{}, 1), make(chan struct{})
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	sk := nostr.Generate()
	peer := peertest.NewRawPeerWithKey(t, f.Relay.URL, sk)
	peer.Initialize(srv.PublicKey())
	req := peer.Message(srv.PublicKey(), countSeven, directTag(f.payload(t, 16)))
	peer.Publish(req)
	<-f.r.entered
	peer.Pool.Close() // gone
	probe := peertest.NewRawPeer(t, f.Relay.URL)
	testwait.Eventually(t, 10*time.Second, "the relay sees the client gone", func() bool {
		ctx, cancel := testwait.Context(t, 5*time.Second)
		defer cancel()
		return errors.Is(probe.Pool.Publish(ctx, probe.Message(sk.Public(), "{}")), nostrx.ErrUnheard)
	})
	close(f.r.hold)
	testwait.Eventually(t, 20*time.Second, "the paid call runs", func() bool { return f.Calls.Load() == 1 })

	back := peertest.NewRawPeerWithKey(t, f.Relay.URL, sk)
	// Sent id, then the messages up to its answer: the owed change may
	// come with the first request, initialize.
	send := func(id, msg string) []peerMsg {
		back.Publish(back.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":`+id+`,`+msg+`}`))
		return readUntil(t, back, func(p peerMsg) bool { return string(p.m["id"]) == id })
	}
	echo := func(id int) []peerMsg {
		return send(peertest.JSONInt(id), `"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}`)
	}
	// Not Initialize's id: the same event within the same second as the
	// first client's would be a replay, and dropped.
	got := send(`"init again"`, `"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
	back.Publish(back.Message(srv.PublicKey(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	got = append(got, echo(1)...)
	var change string
	for _, p := range got {
		if p.method() == contextvm.MethodPaymentAccepted && p.evt.Tags.Find("e")[1] == req.ID.Hex() {
			change = p.change()
		}
	}
	if change == "" {
		// The owed change may follow the echo's answer.
		p := readUntil(t, back, func(p peerMsg) bool { return p.method() == contextvm.MethodPaymentAccepted })
		if last := p[len(p)-1]; last.evt.Tags.Find("e")[1] == req.ID.Hex() {
			change = last.change()
		}
	}
	if v, err := payments.NewFakeWallet(f.mint).KeepChange(context.Background(), change); err != nil || v != 6 {
		t.Fatalf("the change sent on the next contact: %d %v", v, err)
	}
	if got := echo(2); methods(got) != "result" {
		t.Fatalf("the change was sent again: %s", methods(got))
	}
}

// Two requests racing with one payload: one is paid by it and runs; the
// other is told its payment was rejected, and asked to pay otherwise.
func TestDirect_RacingPayloadOnePaysTheOtherIsRejected(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(true), peertest.CounterServer(&f.Calls))
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	payload := f.payload(t, 10)
	for id := range 2 {
		peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":`+peertest.JSONInt(id)+`,"method":"tools/call","params":{"name":"count","arguments":{}}}`, directTag(payload)))
	}
	var results, required, accepted, rejected int
	for results+required < 2 {
		_, m := peertest.NextMessage(t, peer)
		switch peertest.Method(m) {
		case "":
			results++
		case contextvm.MethodPaymentRequired:
			required++
		case contextvm.MethodPaymentAccepted:
			accepted++
		case contextvm.MethodPaymentRejected:
			rejected++
		}
	}
	// Paid exactly, the one that ran gets no payment_accepted: its result
	// says it.
	if results != 1 || required != 1 || accepted != 0 || rejected != 1 || f.Calls.Load() != 1 || f.srv.Balance() != 10 {
		t.Fatalf("%d results, %d payment_required, %d accepted, %d rejected, %d runs, the server holds %d",
			results, required, accepted, rejected, f.Calls.Load(), f.srv.Balance())
	}
	if n := f.r.calls.Load(); n != 1 {
		t.Fatalf("the payload was handed to the redeemer %d times; the server redeems a payload once", n)
	}
}

// A server that takes direct payments only asks for one in
// payment_required; the client pays it by sending the request again with
// it. A payment the server rejects (here short of its fee) goes back to
// the wallet, and the call is paid that way instead.
func TestDirect_PaymentRequiredAnsweredWithTheRequestAgain(t *testing.T) {
	for _, tc := range []struct {
		name            string
		known, explicit bool
	}{
		{"price unknown", false, false},
		{"rejected then asked", true, false},
		{"explicit gating", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := tc.known
			f := newDirectFixture(t, 1)
			srv := peertest.Serve(t, f.serverOptions(false), peertest.CounterServer(&f.Calls))
			wallet := payments.NewFakeWallet(f.mint, 10, 16)
			var rep reports
			cs := f.Client(t, srv, &cep8.PayOptions{Bearers: []payments.Bearer{wallet}, Budget: &payments.Budget{PerCall: 20}, Report: rep.add,
				ExplicitGating: tc.explicit})
			if known {
				ctx, cancel := testwait.Context(t, 20*time.Second)
				defer cancel()
				if _, err := cs.ListTools(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := peertest.Call(cs, "count", nil); err != nil || res.Content[0].(*mcp.TextContent).Text != "1" {
				t.Fatalf("paid call: %v %v", res, err)
			}
			// 11 asked: the 16 note, 5 back; the 10 note rejected and kept.
			if w, s := wallet.Balance(), f.srv.Balance(); w != 15 || s != 11 {
				t.Fatalf("the client holds %d, the server %d; want 15 and 11", w, s)
			}
			if got := rep.count(func(p contextvm.PaymentReport) bool { return p.Rejected }); got != map[bool]int{false: 0, true: 1}[known] {
				t.Fatalf("%d rejected reports: %+v", got, rep.all)
			}
		})
	}
}

// Budgets hold direct payments as any: a price over the per-call cap is
// declined and nothing leaves the wallet; a day's limit reached declines
// the next call.
func TestDirect_BudgetsHold(t *testing.T) {
	f := newDirectFixture(t, 0)
	srv := peertest.Serve(t, f.serverOptions(false), peertest.CounterServer(&f.Calls))
	wallet := payments.NewFakeWallet(f.mint, 10, 10, 10)
	for _, tc := range []struct {
		budget *payments.Budget
		paid   int
		reason string
	}{
		{&payments.Budget{PerCall: 5}, 0, contextvm.DeclinedOverCap},
		{&payments.Budget{PerCall: 10, PerDay: 15}, 1, contextvm.DeclinedOverDaily},
	} {
		cs := f.Client(t, srv, &cep8.PayOptions{Bearers: []payments.Bearer{wallet}, Budget: tc.budget})
		ctx, cancel := testwait.Context(t, 20*time.Second)
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		cancel()
		for i := range tc.paid {
			if _, err := peertest.Call(cs, "count", nil); err != nil {
				t.Fatalf("call %d within %s: %v", i, tc.reason, err)
			}
		}
		_, err := peertest.Call(cs, "count", nil)
		if d, ok := contextvm.Declined(err); !ok || d.Reason != tc.reason {
			t.Fatalf("%v; want declined %s", err, tc.reason)
		}
	}
	if w, s := wallet.Balance(), f.srv.Balance(); w != 20 || s != 10 {
		t.Fatalf("the client holds %d, the server %d; want 20 and 10", w, s)
	}
}

// BenchmarkDirectPaidCall is a call paid in the request on the fake cash
// rail, with change each time (one note worth more than the price, its
// change paying the next call), beside a free call: what a direct
// payment adds to a call's round trip, the rail's cost aside (the fake
// mint is in memory).
func BenchmarkDirectPaidCall(b *testing.B) {
	r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	mint := payments.NewFakeMint("m")
	p, _ := contextvm.ParsePrice("tool:count=1")
	var calls atomic.Int64
	srv := peertest.Serve(b, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Prices: []contextvm.Price{p},
		Gate: cep8.NewGate(cep8.Options{Redeemers: []payments.Redeemer{&payments.FakeRedeemer{Mint: mint}}})}, peertest.CounterServer(&calls))
	wallet := payments.NewFakeWallet(mint, 1<<40)
	cs := peertest.Connect(b, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Payer: (&cep8.PayOptions{Bearers: []payments.Bearer{wallet}, Budget: &payments.Budget{PerCall: 1 << 41}}).Payer()})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, tool string
		args       map[string]any
	}{{"free", "echo", map[string]any{"text": "x"}}, {"direct", "count", map[string]any{}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := peertest.Call(cs, c.tool, c.args)
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %v", c.tool, res, err)
				}
			}
		})
	}
	if paid := calls.Load(); wallet.Balance() != 1<<40-paid {
		b.Fatalf("after %d paid calls the wallet holds %d", paid, wallet.Balance())
	}
}

// A usd price is paid directly with the most the client pays at its own
// rate (0.05 usd at 50 000 usd a bitcoin and 2%: 102 sats, out of a note
// of 200); the server keeps its own conversion, in sats, and returns the
// rest: at the server's 49 500 that is 102 sats (rounded up), at 60 000
// it is 84, fewer than the client sent. The payment is reported, and the
// budget counts it, at what the server kept, not at what was sent.
func TestDirect_USDPriceServerKeepsItsSats(t *testing.T) {
	for _, tc := range []struct {
		serverRate string
		kept       int64
	}{{"49500", 102}, {"60000", 84}} {
		t.Run(tc.serverRate, func(t *testing.T) {
			f := newDirectFixture(t, 0)
			opts := f.serverOptions(true, "tool:count=0.05:usd")
			opts.Gate = cep8.NewGate(cep8.Options{Processors: f.GateOptions(0).Processors, Redeemers: []payments.Redeemer{f.r}, Rates: rate{usd: tc.serverRate}})
			srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
			wallet := payments.NewFakeWallet(f.mint, 200)
			budget := &payments.Budget{PerCall: 500}
			var rep reports
			cs := f.Client(t, srv, &cep8.PayOptions{
				Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
				Bearers:  []payments.Bearer{wallet},
				Budget:   budget,
				Rates:    rate{usd: "50000"},
				Report:   rep.add,
			})
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := peertest.Call(cs, "count", nil); err != nil {
				t.Fatal(err)
			}
			if w, s := wallet.Balance(), f.srv.Balance(); w != 200-tc.kept || s != tc.kept {
				t.Fatalf("the client holds %d, the server %d; want %d and %d", w, s, 200-tc.kept, tc.kept)
			}
			if a, _ := f.Balances(t); a != 100 {
				t.Fatalf("an invoice was paid: alice holds %d", a)
			}
			if spent, _, _ := budget.Spent(context.Background(), srv.PublicKey().Hex()); spent != tc.kept {
				t.Fatalf("the budget counts %d spent; want %d", spent, tc.kept)
			}
			if n := rep.count(func(p contextvm.PaymentReport) bool { return p.Paid && !p.Accepted && p.Amount == tc.kept }); n != 1 {
				t.Fatalf("reported %+v; want one payment of %d", rep.all, tc.kept)
			}
		})
	}
}
