package cep8_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reports collects a client's payment reports.
type reports struct {
	mu  sync.Mutex
	all []contextvm.PaymentReport
}

func (r *reports) add(p contextvm.PaymentReport) {
	r.mu.Lock()
	r.all = append(r.all, p)
	r.mu.Unlock()
}
func (r *reports) count(f func(contextvm.PaymentReport) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.all {
		if f(p) {
			n++
		}
	}
	return n
}

// A priced call through cvm client and server, transparent flow: paid once,
// balances moved by exactly the price, reported paid then accepted.
func TestPayTransparent_GoClientPaysExactlyThePrice(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(0), peertest.CounterServer(&f.Calls))
	var rep reports
	cs := f.Client(t, srv, &cep8.PayOptions{
		Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget:   &payments.Budget{PerCall: 10},
		Report:   rep.add,
	})
	for i := range 2 {
		res, err := peertest.Call(cs, "count", nil)
		if err != nil {
			t.Fatalf("paid call %d: %v", i, err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != []string{"1", "2"}[i] {
			t.Fatalf("call %d answered %q", i, got)
		}
	}
	if peertest.CallEcho(t, cs, "free") != "free" {
		t.Fatal("free tool")
	}
	if a, s := f.Balances(t); a != 80 || s != 20 {
		t.Fatalf("balances alice %d srv %d; want 80 and 20", a, s)
	}
	if paid, accepted := rep.count(func(p contextvm.PaymentReport) bool { return p.Paid && !p.Accepted }),
		rep.count(func(p contextvm.PaymentReport) bool { return p.Accepted }); paid != 2 || accepted != 2 {
		t.Fatalf("%d paid and %d accepted reports; want 2 and 2: %+v", paid, accepted, rep.all)
	}
	if r := rep.all[0]; r.Amount != 10 || r.Unit != "sats" || r.Capability != "tool:count" || r.Server != srv.PublicKey().Hex() {
		t.Fatalf("report %+v", r)
	}
}

// The same paid request event, replayed 100 times and once more after a
// restart, is charged once and run once; every replay is answered from the
// stored result.
func TestPayTransparent_ReplayChargedOnceAnsweredFromStore(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	dir := t.TempDir()
	sk := nostr.Generate()
	start := func() (*contextvm.Server, *durable.File) {
		state, err := durable.Open(dir, sk.Public().Hex(), durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.ServerOptions(0)
		opts.Signer, opts.State = contextvm.NewKeySigner(sk), state
		opts.Encryption = contextvm.EncryptOptional
		return peertest.Serve(t, opts, peertest.CounterServer(&f.Calls)), state
	}
	srv, state := start()
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	req := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	peer.Publish(req)

	evt, m := peertest.NextMessage(t, peer)
	if peertest.Method(m) != contextvm.MethodPaymentRequired || evt.Tags.Find("e")[1] != req.ID.Hex() {
		t.Fatalf("first answer %s", evt.Content)
	}
	pr, unit, err := contextvm.ParsePaymentRequired(m["params"])
	if err != nil || pr.Amount != 10 || pr.PMI != payments.PMIFake || unit != "" {
		t.Fatalf("payment_required %s: %v", m["params"], err)
	}
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), pr, 10); err != nil {
		t.Fatal(err)
	}
	if _, m := peertest.NextMessage(t, peer); peertest.Method(m) != contextvm.MethodPaymentAccepted {
		t.Fatalf("after paying: %v", m)
	}
	_, result := peertest.NextMessage(t, peer)
	want := string(result["result"])
	if !strings.Contains(want, `"text":"1"`) {
		t.Fatalf("result %s", want)
	}

	// The relay pool drops an event id it has just delivered, so the same
	// request event comes again in fresh gift wraps, as its client would
	// send it again.
	for i := range 100 {
		wrap, err := contextvm.Wrap(req, srv.PublicKey(), []nostr.Kind{contextvm.KindGiftWrap, contextvm.KindEphemeralGiftWrap}[i%2])
		if err != nil {
			t.Fatal(err)
		}
		peer.Publish(wrap)
	}
	for i := range 100 {
		evt, m := peertest.NextMessage(t, peer)
		if string(m["result"]) != want || string(m["id"]) != "7" || evt.Tags.Find("e")[1] != req.ID.Hex() {
			t.Fatalf("replay %d answered %s", i, evt.Content)
		}
	}
	srv.Close()
	state.Close()

	srv, state = start()
	defer state.Close()
	defer srv.Close()
	peer.Publish(req)
	if _, m := peertest.NextMessage(t, peer); string(m["result"]) != want {
		t.Fatalf("replay after restart answered %v", m)
	}
	if got := f.Calls.Load(); got != 1 {
		t.Fatalf("the paid tool ran %d times", got)
	}
	if a, s := f.Balances(t); a != 90 || s != 10 {
		t.Fatalf("balances alice %d srv %d; want 90 and 10", a, s)
	}
}

// A server that stops while a paid call runs answers the call's replay,
// after its restart, with "paid, result lost", and does not run it again.
func TestPayTransparent_CrashMidCallReplayGetsResultLost(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	dir := t.TempDir()
	sk := nostr.Generate()
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	var runs atomic.Int64
	mcpServer := func() *mcp.Server {
		s := peertest.EchoServer()
		mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			runs.Add(1)
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{}, nil, nil
		})
		return s
	}
	start := func() (*contextvm.Server, *durable.File) {
		state, err := durable.Open(dir, sk.Public().Hex(), durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.ServerOptions(0, "tool:slow=10")
		opts.Signer, opts.State = contextvm.NewKeySigner(sk), state
		return peertest.Serve(t, opts, mcpServer()), state
	}
	srv, state := start()
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Initialize(srv.PublicKey())
	req := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	peer.Publish(req)
	_, m := peertest.NextMessage(t, peer)
	pr, _, _ := contextvm.ParsePaymentRequired(m["params"])
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), pr, 10); err != nil {
		t.Fatal(err)
	}
	<-started
	srv.Close() // answers the call "server shutting down"
	state.Close()
	srv, state = start()
	defer state.Close()
	defer srv.Close()
	for {
		_, m = peertest.NextMessage(t, peer)
		if peertest.Method(m) == "" && strings.Contains(string(m["error"]), "shutting down") {
			break
		}
	}
	peer.Publish(req)
	_, m = peertest.NextMessage(t, peer)
	var resp struct {
		ID    string        `json:"id"`
		Error jsonrpc.Error `json:"error"`
	}
	b, _ := json.Marshal(m)
	json.Unmarshal(b, &resp)
	if resp.ID != "s" || resp.Error.Code != contextvm.CodePaidResultLost || !strings.Contains(resp.Error.Message, "paid, result lost") {
		t.Fatalf("replay after a crash answered %s", b)
	}
	if runs.Load() != 1 {
		t.Fatalf("ran %d times", runs.Load())
	}
	if a, _ := f.Balances(t); a != 90 {
		t.Fatalf("alice has %d; want 90", a)
	}
}

// A pricer may waive a price or refuse a request; neither charges, and a
// price computed outside the announced range is never charged.
func TestPayTransparent_WaivedRefusedAndOutOfRange(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	opts := f.ServerOptions(0, "tool:echo=1-5")
	po := f.GateOptions(0)
	po.Pricer = payments.PricerFunc(func(_ context.Context, r payments.PriceRequest) (payments.Quote, error) {
		var p struct {
			Arguments struct{ Text string } `json:"arguments"`
		}
		json.Unmarshal(r.Params, &p)
		switch p.Arguments.Text {
		case "free":
			return payments.Quote{Waive: true}, nil
		case "nope":
			return payments.Quote{}, payments.Refuse("not today")
		}
		return payments.Quote{Amount: int64(len(p.Arguments.Text))}, nil
	})
	opts.Gate = cep8.NewGate(po)
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	cs := f.Client(t, srv, &cep8.PayOptions{
		Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget:   &payments.Budget{PerCall: 10},
	})
	if res, err := peertest.Call(cs, "echo", map[string]any{"text": "free"}); err != nil || res.Content[0].(*mcp.TextContent).Text != "free" {
		t.Fatalf("waived: %v", err)
	}
	if _, err := peertest.Call(cs, "echo", map[string]any{"text": "nope"}); peertest.RPCCode(err) != contextvm.CodePriceRefused || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("refused: %v", err)
	}
	if _, err := peertest.Call(cs, "echo", map[string]any{"text": "too long a text"}); peertest.RPCCode(err) != contextvm.CodePriceRefused {
		t.Fatalf("out of range: %v", err)
	}
	if a, _ := f.Balances(t); a != 100 {
		t.Fatalf("alice has %d; want 100", a)
	}
	if res, err := peertest.Call(cs, "echo", map[string]any{"text": "abc"}); err != nil || res.Content[0].(*mcp.TextContent).Text != "abc" {
		t.Fatalf("computed price: %v", err)
	}
	if a, s := f.Balances(t); a != 97 || s != 3 {
		t.Fatalf("balances %d %d; want 97 and 3", a, s)
	}
}

// lyingHandler says it paid and pays nothing.
type lyingHandler struct{}

func (lyingHandler) PMI() string { return payments.PMIFake }
func (lyingHandler) Pay(context.Context, payments.PaymentRequired, int64) (payments.Receipt, error) {
	return payments.Receipt{}, nil
}

// A payment never made expires: payment_rejected, an error, no execution.
func TestPayTransparent_ExpiredPaymentIsRejected(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(time.Second), peertest.CounterServer(&f.Calls))
	var rep reports
	cs := f.Client(t, srv, &cep8.PayOptions{Handlers: []payments.Handler{lyingHandler{}}, Budget: &payments.Budget{PerCall: 10}, Report: rep.add})
	_, err := peertest.Call(cs, "count", nil)
	if peertest.RPCCode(err) != contextvm.CodePaymentRejected {
		t.Fatalf("unpaid call: %v", err)
	}
	if f.Calls.Load() != 0 {
		t.Fatal("an unpaid call ran")
	}
	if rep.count(func(p contextvm.PaymentReport) bool { return p.Rejected }) != 1 {
		t.Fatalf("reports %+v", rep.all)
	}
}

// The client refuses, before paying, a price over its cap, one without a
// cap, one in a unit its budget does not hold, and one from a server not
// allowed to charge.
func TestPayClient_BudgetRefusesBeforePaying(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	opts := f.ServerOptions(0, "tool:count=10", "tool:echo=1:eur")
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	h := []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}}
	for _, c := range []struct {
		pay    *cep8.PayOptions
		tool   string
		reason string
	}{
		{nil, "count", contextvm.DeclinedNoPayments},
		{&cep8.PayOptions{Handlers: h}, "count", contextvm.DeclinedNoCap},
		{&cep8.PayOptions{Handlers: h, Budget: &payments.Budget{PerCall: 9}}, "count", contextvm.DeclinedOverCap},
		{&cep8.PayOptions{Handlers: h, Budget: &payments.Budget{PerCall: 10, Allow: []string{"someone-else"}}}, "count", contextvm.DeclinedNotAllowed},
		{&cep8.PayOptions{Handlers: h, Budget: &payments.Budget{PerCall: 10}}, "echo", contextvm.DeclinedUnit},
		{&cep8.PayOptions{Handlers: h, Budget: &payments.Budget{PerCall: 10}, Confirm: func(context.Context, contextvm.PaymentOffer) bool { return false }}, "count", contextvm.DeclinedByPerson},
		{&cep8.PayOptions{Budget: &payments.Budget{PerCall: 10}}, "count", contextvm.DeclinedNoHandler},
	} {
		cs := f.Client(t, srv, c.pay)
		for range cs.Tools(context.Background(), nil) { // learns the prices and their units
		}
		_, err := peertest.Call(cs, c.tool, map[string]any{"text": "x"})
		d, ok := contextvm.Declined(err)
		if peertest.RPCCode(err) != contextvm.CodePaymentDeclined || !ok || d.Reason != c.reason {
			t.Errorf("%s: %v (%+v), want reason %s", c.reason, err, d, c.reason)
		}
	}
	if a, _ := f.Balances(t); a != 100 || f.Calls.Load() != 0 {
		t.Fatalf("alice has %d, %d calls ran", a, f.Calls.Load())
	}
}

// watchedProcessor reports each Verify's end.
type watchedProcessor struct {
	*payments.FakeProcessor
	ended chan error
}

func (p watchedProcessor) Verify(ctx context.Context, c payments.Charge, req payments.PaymentRequired) error {
	err := p.FakeProcessor.Verify(ctx, c, req)
	p.ended <- err
	return err
}

// A client that declines to pay cancels the request, and the server stops
// waiting for its payment at once instead of until the payment request
// expires (here a minute); nothing runs, nothing is charged. So does a
// client closed as soon as its call is declined, as a one-shot command is:
// Close waits for the withdrawal instead of cutting it short, and there is
// nothing to warn of.
func TestPayTransparent_DeclinedRequestIsWithdrawnAtOnce(t *testing.T) {
	for _, closed := range []bool{false, true} {
		t.Run(map[bool]string{false: "open", true: "closed at once"}[closed], func(t *testing.T) {
			f := peertest.NewPayFixture(t, 100)
			opts := f.ServerOptions(time.Minute)
			po := f.GateOptions(time.Minute)
			proc := watchedProcessor{po.Processors[0].(*payments.FakeProcessor), make(chan error, 4)}
			po.Processors[0] = proc
			opts.Gate = cep8.NewGate(po)
			srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
			var logs waitbuf.Buffer
			cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL},
				Encryption: contextvm.EncryptDisabled, RequestTimeout: testwait.Timeout(20 * time.Second), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Payer: (&cep8.PayOptions{Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
					Budget: &payments.Budget{PerCall: 9}}).Payer()})
			if _, err := peertest.Call(cs, "count", nil); peertest.RPCCode(err) != contextvm.CodePaymentDeclined {
				t.Fatalf("call over the cap: %v", err)
			}
			if closed {
				cs.Close()
			}
			// The long wait, then the final look (about finalCheck).
			for i := range 2 {
				select {
				case err := <-proc.ended:
					if err == nil {
						t.Fatalf("verification %d succeeded", i)
					}
				case <-time.After(testwait.Timeout(10 * time.Second)):
					t.Fatalf("the server still waits for the payment of a declined request (verification %d)", i)
				}
			}
			if a, s := f.Balances(t); a != 100 || s != 0 || f.Calls.Load() != 0 {
				t.Fatalf("alice %d, srv %d, %d calls ran", a, s, f.Calls.Load())
			}
			if strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("the client warns: %s", logs.String())
			}
		})
	}
}

// slowVerifier notices no payment until its first wait is cancelled.
type slowVerifier struct {
	*payments.FakeProcessor
	waits atomic.Int32
}

func (p *slowVerifier) Verify(ctx context.Context, c payments.Charge, req payments.PaymentRequired) error {
	if p.waits.Add(1) == 1 {
		<-ctx.Done()
		return context.Cause(ctx)
	}
	return p.FakeProcessor.Verify(ctx, c, req)
}

// A request cancelled after its payment was made is not lost: the server's
// last look finds the payment, credits it and runs the request.
func TestPayTransparent_PaidThenCancelledStillRuns(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	opts := f.ServerOptions(time.Minute)
	po := f.GateOptions(time.Minute)
	po.Processors[0] = &slowVerifier{FakeProcessor: po.Processors[0].(*payments.FakeProcessor)}
	opts.Gate = cep8.NewGate(po)
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs := f.Client(t, srv, &cep8.PayOptions{Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget: &payments.Budget{PerCall: 10},
		Report: func(r contextvm.PaymentReport) {
			if r.Paid {
				cancel() // the go-sdk sends notifications/cancelled
			}
		}})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count"}); err == nil {
		t.Fatal("the cancelled call answered")
	}
	testwait.Until(t.Context(), 10*time.Second, func() bool { return f.Calls.Load() > 0 })
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("alice %d, srv %d, %d calls ran; want the paid request run once", a, s, f.Calls.Load())
	}
}

// A payment_accepted or payment_rejected not from the server is ignored.
func TestPayClient_ForgedNotificationsIgnored(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(0), peertest.CounterServer(&f.Calls))
	forger := peertest.NewRawPeer(t, f.Relay.URL)
	sk := nostr.Generate()
	var rep reports
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL}, Signer: contextvm.NewKeySigner(sk),
		Encryption: contextvm.EncryptDisabled, Payer: (&cep8.PayOptions{
			Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
			Budget:   &payments.Budget{PerCall: 10},
			Report:   rep.add,
			Confirm: func(_ context.Context, o contextvm.PaymentOffer) bool {
				reqID := strings.Split(o.PayReq, ":")[1]
				for _, m := range []string{
					`{"jsonrpc":"2.0","method":"notifications/payment_rejected","params":{"pmi":"fake","amount":10,"message":"forged"}}`,
					`{"jsonrpc":"2.0","method":"notifications/payment_accepted","params":{"pmi":"fake","amount":10}}`,
				} {
					evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Content: m, Tags: nostr.Tags{{"p", sk.Public().Hex()}, {"e", reqID}}}
					evt.Sign(forger.SK)
					forger.Publish(evt)
				}
				return true
			},
		}).Payer()})
	if _, err := peertest.Call(cs, "count", nil); err != nil {
		t.Fatalf("the call failed on forged notifications: %v", err)
	}
	if n := rep.count(func(p contextvm.PaymentReport) bool { return p.Accepted || p.Rejected }); n != 1 {
		t.Fatalf("%d accepted/rejected reports; want the server's one: %+v", n, rep.all)
	}
}

// walletSlowToSay pays, then says so only once the client has read the
// server's payment_accepted: a wallet whose answer comes after the server
// saw the payment settle.
type walletSlowToSay struct {
	payments.FakeHandler
	log *waitbuf.Buffer // the client's log
}

func (w *walletSlowToSay) Pay(ctx context.Context, req payments.PaymentRequired, amount int64) (payments.Receipt, error) {
	r, err := w.FakeHandler.Pay(ctx, req, amount)
	if err != nil {
		return r, err
	}
	return r, w.log.WaitFor(ctx, "payment_accepted")
}

// A payment_accepted that comes before the wallet said it paid is kept, and
// reported after the payment, as callers read them: the server may see a
// payment settle before the paying wallet answers (found by a loaded run).
func TestPayClient_AcceptedBeforeTheWalletAnswers(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(0), peertest.CounterServer(&f.Calls))
	var log waitbuf.Buffer
	var rep reports
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL},
		Encryption: contextvm.EncryptDisabled, RequestTimeout: testwait.Timeout(20 * time.Second),
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Payer: (&cep8.PayOptions{
			Handlers: []payments.Handler{&walletSlowToSay{FakeHandler: payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}, log: &log}},
			Budget:   &payments.Budget{PerCall: 10},
			Report:   rep.add,
		}).Payer()})
	if _, err := peertest.Call(cs, "count", nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "two payment reports", func() bool { return rep.count(func(contextvm.PaymentReport) bool { return true }) >= 2 })
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.all) != 2 || !rep.all[0].Paid || rep.all[0].Accepted || !rep.all[1].Accepted {
		t.Fatalf("reports %+v; want the payment, then its acceptance", rep.all)
	}
}

// Explicit gating by hand: -32042 with payment options, the same payment
// options while they are unpaid, the result once paid, and the grant
// consumed once.
func TestPayExplicit_PendingThenPaidThenConsumed(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(0), peertest.CounterServer(&f.Calls))
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		nostr.Tag{"payment_interaction", "explicit_gating"}))
	evt, _ := peertest.NextMessage(t, peer)
	if tag := evt.Tags.Find("pmi"); tag == nil || tag[1] != payments.PMIFake {
		t.Errorf("the server's first message has no pmi tag: %v", evt.Tags)
	}
	if tag := evt.Tags.Find("payment_interaction"); tag == nil || tag[1] != "explicit_gating" {
		t.Fatalf("the server did not echo explicit_gating: %v", evt.Tags)
	}
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	const callJSON = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":{"progressToken":%d}}}`
	send := func(id int) (int64, json.RawMessage, json.RawMessage) {
		peer.Publish(peer.Message(srv.PublicKey(), strings.NewReplacer("%d", peertest.JSONInt(id)).Replace(callJSON)))
		_, m := peertest.NextMessage(t, peer)
		var e struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		}
		json.Unmarshal(m["error"], &e)
		return e.Code, e.Data, m["result"]
	}
	code, data, _ := send(1)
	opts, ok := contextvm.IsPaymentRequired(&jsonrpc.Error{Code: code, Data: data})
	if !ok || len(opts) != 1 || opts[0].Amount != 10 {
		t.Fatalf("first answer %d %s", code, data)
	}
	if code, data, _ := send(2); !sameOffer(code, data, opts[0]) {
		t.Fatalf("before paying: %d %s; want the same payment request again", code, data)
	}
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), opts[0], 10); err != nil {
		t.Fatal(err)
	}
	var result json.RawMessage
	for id := 3; result == nil; id++ {
		var code int64
		code, _, result = send(id)
		if result == nil && code != contextvm.CodePaymentPending {
			t.Fatalf("after paying: %d", code)
		}
	}
	if !strings.Contains(string(result), `"text":"1"`) {
		t.Fatalf("result %s", result)
	}
	if code, _, _ := send(100); code != contextvm.CodePaymentRequired {
		t.Fatalf("the grant was used twice: %d", code)
	}
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances %d %d, %d runs", a, s, f.Calls.Load())
	}

	bogus := peertest.NewRawPeer(t, f.Relay.URL)
	bogus.Publish(bogus.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count"}}`,
		nostr.Tag{"payment_interaction", "barter"}))
	if _, m := peertest.NextMessage(t, bogus); !strings.Contains(string(m["error"]), `-32602`) || !strings.Contains(string(m["error"]), `"requested":"barter"`) {
		t.Fatalf("unsupported mode answered %s", m["error"])
	}
}

// sameOffer reports whether an answer is -32042 offering req, and only it.
func sameOffer(code int64, data json.RawMessage, req payments.PaymentRequired) bool {
	opts, ok := contextvm.IsPaymentRequired(&jsonrpc.Error{Code: code, Data: data})
	return ok && len(opts) == 1 && opts[0].PayReq == req.PayReq
}

// explicitPeer is a raw client that asked for explicit gating, and sends
// the server the count tool's call again and again, as new events.
type explicitPeer struct {
	t    *testing.T
	peer *peertest.RawPeer
	srv  nostr.PubKey
	id   int
}

func newExplicitPeer(t *testing.T, relayURL string, srv nostr.PubKey) *explicitPeer {
	p := &explicitPeer{t: t, peer: peertest.NewRawPeer(t, relayURL), srv: srv}
	p.peer.Publish(p.peer.Message(srv, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		nostr.Tag{"payment_interaction", "explicit_gating"}))
	peertest.NextMessage(t, p.peer)
	p.peer.Publish(p.peer.Message(srv, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return p
}

// send sends the call once more and returns its answer: the error's code
// and data, or the result.
func (p *explicitPeer) send() (int64, json.RawMessage, json.RawMessage) {
	p.t.Helper()
	p.id++
	p.peer.Publish(p.peer.Message(p.srv, `{"jsonrpc":"2.0","id":`+peertest.JSONInt(p.id)+`,"method":"tools/call","params":{"name":"count","arguments":{}}}`))
	_, m := peertest.NextMessage(p.t, p.peer)
	var e struct {
		Code int64           `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	json.Unmarshal(m["error"], &e)
	return e.Code, e.Data, m["result"]
}

// untilResult sends the call until it gets a result, -32043 (payment
// pending) meanwhile; when says when, for a failure.
func (p *explicitPeer) untilResult(when string) {
	p.t.Helper()
	for {
		code, data, result := p.send()
		if result != nil {
			return
		}
		if code != contextvm.CodePaymentPending {
			p.t.Fatalf("%s: %d %s; want the result, or -32043 first", when, code, data)
		}
	}
}

// offered sends the call and returns the payment request its -32042 offers.
func (p *explicitPeer) offered() payments.PaymentRequired {
	p.t.Helper()
	code, data, _ := p.send()
	opts, ok := contextvm.IsPaymentRequired(&jsonrpc.Error{Code: code, Data: data})
	if !ok || len(opts) != 1 {
		p.t.Fatalf("answered %d %s; want -32042 with one payment option", code, data)
	}
	return opts[0]
}

// CEP-8 keys an explicit-gating grant on the invocation: the client's key,
// the method and the params. A request sent again by another process of
// the same client, while the payment request the first process got is
// unpaid, is that invocation: it is offered the same payment request
// (-32042, not -32043 with nothing to pay), pays it, and runs once; no
// second payment request is issued.
func TestPayExplicit_AnotherProcessIsOfferedTheSameInvoice(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(0), peertest.CounterServer(&f.Calls))
	sk := nostr.Generate()
	process := func(rep *reports, approve bool) *mcp.ClientSession {
		return peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL}, Encryption: contextvm.EncryptDisabled,
			Signer: contextvm.NewKeySigner(sk), RequestTimeout: testwait.Timeout(20 * time.Second), Payer: (&cep8.PayOptions{
				Handlers:       []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
				Budget:         &payments.Budget{PerCall: 10},
				Confirm:        func(context.Context, contextvm.PaymentOffer) bool { return approve },
				Report:         rep.add,
				ExplicitGating: true,
			}).Payer()})
	}
	var first, second reports
	a := process(&first, false)
	if _, err := peertest.Call(a, "count", nil); peertest.RPCCode(err) != contextvm.CodePaymentDeclined {
		t.Fatalf("the first process, declining: %v; want -32017", err)
	}
	a.Close()
	b := process(&second, true)
	if _, err := peertest.Call(b, "count", nil); err != nil {
		t.Fatalf("the second process: %v (code %d); want its paid result", err, peertest.RPCCode(err))
	}
	if len(first.all) != 1 || len(second.all) == 0 || second.all[0].PayReq != first.all[0].PayReq || !second.all[0].Paid {
		t.Fatalf("offered %+v to the first process and %+v to the second; want the same payment request, paid", first.all, second.all)
	}
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances %d %d, %d runs; want 90, 10, 1", a, s, f.Calls.Load())
	}
}

// An unpaid explicit-gating payment request is offered again until it
// expires; after, a request sent again gets a fresh one, which pays for
// the call.
func TestPayExplicit_SameInvoiceUntilItExpiresThenAFreshOne(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	var logs waitbuf.Buffer
	opts := f.ServerOptions(time.Second)
	opts.Logger = logs.Logger()
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	p := newExplicitPeer(t, f.Relay.URL, srv.PublicKey())
	first := p.offered()
	if again := p.offered(); again.PayReq != first.PayReq {
		t.Fatalf("offered %s, then %s while the first was open", first.PayReq, again.PayReq)
	}
	logs.Await(t, 10*time.Second, "explicit-gating payment not verified")
	fresh := p.offered()
	if fresh.PayReq == first.PayReq {
		t.Fatalf("the expired payment request %s was offered again", first.PayReq)
	}
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), fresh, 10); err != nil {
		t.Fatal(err)
	}
	p.untilResult("after paying")
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances %d %d, %d runs; want 90, 10, 1", a, s, f.Calls.Load())
	}
}

// heldVerifier is the Fake rail with a Verify that waits for release
// before it verifies anything: a wallet slow to confirm.
type heldVerifier struct {
	*payments.FakeProcessor
	release chan struct{}
}

func (p heldVerifier) Verify(ctx context.Context, c payments.Charge, req payments.PaymentRequired) error {
	select {
	case <-p.release:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return p.FakeProcessor.Verify(ctx, c, req)
}

// -32043 (payment pending) answers a request sent again only once its
// payment has been seen and while it is verified: before, the payment
// request is offered again; after, the call runs, once.
func TestPayExplicit_PendingOnlyWhileThePaymentIsVerified(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	held := heldVerifier{FakeProcessor: &payments.FakeProcessor{Ledger: f.Ledger, Payee: "srv"}, release: make(chan struct{})}
	opts := f.ServerOptions(0)
	po := f.GateOptions(0)
	po.Processors = []payments.Processor{held}
	opts.Gate = cep8.NewGate(po)
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	p := newExplicitPeer(t, f.Relay.URL, srv.PublicKey())
	req := p.offered()
	if code, data, _ := p.send(); !sameOffer(code, data, req) {
		t.Fatalf("unpaid: %d %s; want the same payment request", code, data)
	}
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), req, 10); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code, data, _ := p.send(); code != contextvm.CodePaymentPending || !strings.Contains(string(data), "retry_after") {
			t.Fatalf("paid, not verified yet: %d %s; want -32043", code, data)
		}
	}
	close(held.release)
	p.untilResult("verified")
	if next := p.offered(); next.PayReq == req.PayReq {
		t.Fatal("the spent payment request was offered again")
	}
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances %d %d, %d runs; want 90, 10, 1", a, s, f.Calls.Load())
	}
}

// A cvm client that asks for explicit gating pays and calls again on its
// own.
func TestPayExplicit_GoClient(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.Serve(t, f.ServerOptions(0), peertest.CounterServer(&f.Calls))
	cs := f.Client(t, srv, &cep8.PayOptions{
		Handlers:       []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget:         &payments.Budget{PerCall: 10},
		ExplicitGating: true,
	})
	for i := range 2 {
		if _, err := peertest.Call(cs, "count", nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if a, s := f.Balances(t); a != 80 || s != 20 || f.Calls.Load() != 2 {
		t.Fatalf("balances %d %d, %d runs", a, s, f.Calls.Load())
	}
}

func TestIsPaymentRequired_TellsURLElicitationApart(t *testing.T) {
	if _, ok := contextvm.IsPaymentRequired(&jsonrpc.Error{Code: -32042, Data: json.RawMessage(`{"elicitations":[{"url":"https://x"}]}`)}); ok {
		t.Fatal("URLElicitationRequired taken for a payment")
	}
	if o, ok := contextvm.IsPaymentRequired(&jsonrpc.Error{Code: -32042, Data: json.RawMessage(`{"payment_options":[{"amount":3,"pmi":"fake","pay_req":"x"}]}`)}); !ok || o[0].Amount != 3 {
		t.Fatal("payment options not read")
	}
}

func TestParsePaymentRequired_BothForms(t *testing.T) {
	req, unit, err := contextvm.ParsePaymentRequired(json.RawMessage(`{"amount":1000,"currency":"sats","invoice":"lnbc10u1p…","description":"Payment for tool execution"}`))
	if err != nil || req.Amount != 1000 || req.PayReq != "lnbc10u1p…" || req.PMI != payments.PMILightningBolt11 || unit != "sats" {
		t.Fatalf("seed form: %+v %q %v", req, unit, err)
	}
	req, _, err = contextvm.ParsePaymentRequired(json.RawMessage(`{"amount":10,"pay_req":"fake:a:b:10","pmi":"fake","ttl":300,"_meta":{}}`))
	if err != nil || req.TTL != 300 || req.PMI != "fake" {
		t.Fatalf("CEP-8 form: %+v %v", req, err)
	}
	for _, bad := range []string{`{"amount":-1,"pay_req":"x","pmi":"y"}`, `{"amount":1.5,"pay_req":"x","pmi":"y"}`, `{"pay_req":"x","pmi":"y"}`, `{"amount":1}`, `{"amount":1,"invoice":"cashuB…"}`, `[]`} {
		if _, _, err := contextvm.ParsePaymentRequired(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzParsePaymentRequired(f *testing.F) {
	f.Add([]byte(`{"amount":1000,"currency":"sats","invoice":"lnbc1","description":"d"}`))
	f.Add([]byte(`{"amount":10,"pay_req":"fake:a:b:10","pmi":"fake","ttl":300,"_meta":{}}`))
	f.Add([]byte(`{"amount":1e3,"pay_req":"x","pmi":"y","ttl":1.0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, _, err := contextvm.ParsePaymentRequired(b)
		if err != nil {
			return
		}
		if req.Amount < 0 || req.TTL < 0 || req.PayReq == "" || req.PMI == "" {
			t.Fatalf("accepted %q as %+v", b, req)
		}
	})
}

// BenchmarkPaidCall measures a call through a relay on loopback, free and
// paid on the Fake rail (transparent: payment_required, pay, verify,
// payment_accepted, result): the difference is what a payment adds.
func BenchmarkPaidCall(b *testing.B) {
	r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	ledger := payments.NewLedger(map[string]int64{"alice": 1 << 50})
	p, _ := contextvm.ParsePrice("tool:count=1")
	var calls atomic.Int64
	srv := peertest.Serve(b, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Prices: []contextvm.Price{p},
		Gate: cep8.NewGate(cep8.Options{Processors: []payments.Processor{&payments.FakeProcessor{Ledger: ledger, Payee: "srv"}}})}, peertest.CounterServer(&calls))
	cs := peertest.Connect(b, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Payer: (&cep8.PayOptions{Handlers: []payments.Handler{&payments.FakeHandler{Ledger: ledger, Payer: "alice"}}, Budget: &payments.Budget{PerCall: 1}}).Payer()})
	for _, c := range []struct {
		name, tool string
		args       map[string]any
	}{{"free", "echo", map[string]any{"text": "x"}}, {"paid", "count", map[string]any{}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := peertest.Call(cs, c.tool, c.args)
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError {
					b.Fatalf("%s answered with an error: the benchmark would time no tool", c.tool)
				}
			}
		})
	}
}

// Under explicit gating a request goes out again under a new event after
// its -32042; a later answer to its first event (a survivor's -32019 for a
// record its lost replica had not removed yet, which CI saw) is stale, and
// the request waits for the answer to the event it is pending under.
func TestPayExplicit_StaleAnswerToTheFirstEventIsIgnored(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.NewRawPeer(t, f.Relay.URL)
	var first nostr.Event
	logs := &waitbuf.Buffer{} // the client's
	served := serveRaw(t, srv, func(evt nostr.Event, id json.RawMessage) (bool, error) {
		if first.ID == (nostr.ID{}) {
			first = evt
			req, err := fakeRequest(f, evt)
			offerRaw(srv, evt, id, req)
			return false, err
		}
		answerRaw(srv, first, id, `"error":{"code":-32019,"message":"the replica running this call stopped before answering"}`)
		// The stale answer reaches the client before the right one, or
		// nothing is tested: the client says when it has dropped it.
		ctx, cancel := testwait.Context(t, 10*time.Second)
		defer cancel()
		err := logs.WaitFor(ctx, "response to no pending request", "e="+first.ID.Hex())
		answerRaw(srv, evt, id, `"result":{"content":[{"type":"text","text":"paid"}]}`)
		return true, err
	})
	explicitCall(f, t, srv, nil, logs, served, "want its answer to the event it was sent again under")
}

// answerRaw answers, as srv, the request event to with a JSON-RPC response
// of id whose rest is body.
func answerRaw(srv *peertest.RawPeer, to nostr.Event, id json.RawMessage, body string) {
	srv.Publish(srv.Message(to.PubKey, `{"jsonrpc":"2.0","id":`+string(id)+`,`+body+`}`, nostr.Tag{"e", to.ID.Hex()}))
}

// serveRaw serves as srv, by hand, on a goroutine: it answers initialize,
// ignores notifications and hands each tools/call to call, until call
// reports it is done or fails. The channel says how it ended.
func serveRaw(t *testing.T, srv *peertest.RawPeer, call func(evt nostr.Event, id json.RawMessage) (done bool, err error)) <-chan error {
	served := make(chan error, 1)
	go func() {
		for calls := 0; ; {
			evt, ok := srv.Next(20 * time.Second)
			if !ok {
				served <- fmt.Errorf("the client sent nothing more after %d calls", calls)
				return
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			json.Unmarshal([]byte(evt.Content), &m)
			switch {
			case len(m.ID) == 0:
			case m.Method == "initialize":
				answerRaw(srv, evt, m.ID, `"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`)
			case m.Method == "tools/call":
				calls++
				if done, err := call(evt, m.ID); done || err != nil {
					served <- err
					return
				}
			}
		}
	}()
	return served
}

// fakeRequest is a Fake payment request of 10 sats to srv for the call
// evt.
func fakeRequest(f *peertest.PayFixture, evt nostr.Event) (payments.PaymentRequired, error) {
	proc := &payments.FakeProcessor{Ledger: f.Ledger, Payee: "srv"}
	return proc.Require(context.Background(), payments.Charge{Amount: 10, Unit: "sats", RequestID: evt.ID.Hex(), Client: evt.PubKey.Hex()})
}

// offerRaw answers the call evt, as srv, -32042 offering req.
func offerRaw(srv *peertest.RawPeer, evt nostr.Event, id json.RawMessage, req payments.PaymentRequired) {
	data, _ := json.Marshal(map[string]any{"payment_options": []payments.PaymentRequired{req}})
	answerRaw(srv, evt, id, `"error":{"code":-32042,"message":"Payment Required","data":`+string(data)+`}`)
}

// explicitCall calls count, as a cvm client asking for explicit gating and
// paying from alice, on the raw server srv, and wants the result "paid"
// that it serves (want says why) and served to end well. Its reports go to
// rep and its logs to logs, each when not nil.
func explicitCall(f *peertest.PayFixture, t *testing.T, srv *peertest.RawPeer, rep *reports, logs *waitbuf.Buffer, served <-chan error, want string) {
	t.Helper()
	pay := &cep8.PayOptions{
		Handlers:       []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget:         &payments.Budget{PerCall: 10},
		ExplicitGating: true,
	}
	if rep != nil {
		pay.Report = rep.add
	}
	opts := contextvm.ClientOptions{Server: srv.SK.Public().Hex(), Relays: []string{f.Relay.URL}, Encryption: contextvm.EncryptDisabled,
		RequestTimeout: testwait.Timeout(20 * time.Second), Payer: pay.Payer()}
	if logs != nil {
		opts.Logger = logs.Logger()
	}
	cs := peertest.Connect(t, opts)
	res, err := peertest.Call(cs, "count", nil)
	if err != nil {
		t.Fatalf("the paid call ended with %v (code %d); %s", err, peertest.RPCCode(err), want)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "paid" {
		t.Fatalf("result %q", text)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// slowPoller is the Fake rail with a Verify that looks at the payment
// once an hour, as a Lightning processor backing off to long polls does.
type slowPoller struct{ *payments.FakeProcessor }

func (p slowPoller) Verify(ctx context.Context, c payments.Charge, req payments.PaymentRequired) error {
	for {
		if paid, err := p.Paid(ctx, c, req); paid || err != nil {
			return err
		}
		select {
		case <-time.After(time.Hour):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// A payment seen by the look made for a request sent again is verified at
// once, not at the verifier's next poll: that request runs.
func TestPayExplicit_SeenPaymentIsVerifiedAtOnce(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	opts := f.ServerOptions(0)
	po := f.GateOptions(0)
	po.Processors = []payments.Processor{slowPoller{&payments.FakeProcessor{Ledger: f.Ledger, Payee: "srv"}}}
	opts.Gate = cep8.NewGate(po)
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	p := newExplicitPeer(t, f.Relay.URL, srv.PublicKey())
	req := p.offered()
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), req, 10); err != nil {
		t.Fatal(err)
	}
	if code, data, result := p.send(); result == nil {
		t.Fatalf("paid: %d %s; want the result", code, data)
	}
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances %d %d, %d runs; want 90, 10, 1", a, s, f.Calls.Load())
	}
}

// A server that has not seen a payment yet (its processor cannot look
// without waiting) offers the same payment request again to the request
// sent after it was paid. The cvm client that paid it does not pay again
// nor give up: it sends the request again later, and gets the result.
func TestPayExplicit_ClientPaidWaitsWhenOfferedTheSameInvoiceAgain(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	srv := peertest.NewRawPeer(t, f.Relay.URL)
	var offered payments.PaymentRequired
	calls := 0
	served := serveRaw(t, srv, func(evt nostr.Event, id json.RawMessage) (bool, error) {
		calls++
		switch calls {
		case 1:
			var err error
			offered, err = fakeRequest(f, evt)
			offerRaw(srv, evt, id, offered)
			return false, err
		case 2:
			offerRaw(srv, evt, id, offered) // paid, but not seen yet as far as this server knows
			return false, nil
		}
		answerRaw(srv, evt, id, `"result":{"content":[{"type":"text","text":"paid"}]}`)
		return true, nil
	})
	var rep reports
	explicitCall(f, t, srv, &rep, nil, served, "want the result once the server saw the payment")
	if a, s := f.Balances(t); a != 90 || s != 10 || len(rep.all) != 1 {
		t.Fatalf("balances %d %d, reports %+v; want one payment", a, s, rep.all)
	}
}

// countingChecker is the Fake rail counting its one-off looks (Checker).
type countingChecker struct {
	*payments.FakeProcessor
	looks atomic.Int64
}

func (c *countingChecker) Paid(ctx context.Context, ch payments.Charge, req payments.PaymentRequired) (bool, error) {
	c.looks.Add(1)
	return c.FakeProcessor.Paid(ctx, ch, req)
}

// A client repeating an unpaid explicit-gating request in a loop makes at
// most one wallet look a lookInterval, not one a repeat.
func TestPayExplicit_RepeatsDoNotFloodTheWallet(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	opts := f.ServerOptions(0)
	po := f.GateOptions(0)
	chk := &countingChecker{FakeProcessor: po.Processors[0].(*payments.FakeProcessor)}
	po.Processors = []payments.Processor{chk}
	opts.Gate = cep8.NewGate(po)
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	p := newExplicitPeer(t, f.Relay.URL, srv.PublicKey())
	start := time.Now()
	first := p.offered()
	const repeats = 4
	for range repeats {
		if again := p.offered(); again.PayReq != first.PayReq {
			t.Fatalf("offered %s, then %s while the first was open", first.PayReq, again.PayReq)
		}
	}
	// One look a second at most (the first repeat may look at once).
	if most := int64(time.Since(start)/time.Second) + 1; chk.looks.Load() > most {
		t.Fatalf("%d repeats in %v made %d wallet looks; want at most %d", repeats, time.Since(start), chk.looks.Load(), most)
	}
}
