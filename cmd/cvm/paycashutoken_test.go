package main

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
)

// addCall is the tools/call add a=1 b=2 the raw client sends.
const addCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}`

// token takes a token of sats out of alice's Cashu wallet (cvm cashu send).
func (w *cashuWorld) token(t *testing.T, sats string) string {
	t.Helper()
	code, out, errOut := w.c.run("cashu", "send", sats)
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "cashuB") {
		t.Fatalf("cvm cashu send %s: %d %s %s", sats, code, out, errOut)
	}
	return strings.TrimSpace(out)
}

// directRequest is a signed add request carrying token as its
// direct_payment, from a raw client with a session open at the gateway.
func (w *cashuWorld) directRequest(t *testing.T, cl *rawClient, token string) nostr.Event {
	t.Helper()
	evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Content: addCall,
		Tags: nostr.Tags{{"p", w.pubkey}, {"direct_payment", cashuwallet.PMIDirect, token}}}
	if err := evt.Sign(cl.sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

// heard is what the gateway said to req: the payment notifications in
// order, and the response, or payment_required (which a raw client does
// not pay) in its stead.
type heard struct {
	notes  []string
	change string // the change payment_accepted returned
	last   rawMessage
}

func (a heard) ran() bool { return strings.Contains(string(a.last.Result), `"sum":3`) }

func (a heard) said(method string) bool {
	for _, n := range a.notes {
		if n == method {
			return true
		}
	}
	return false
}

// await reads the gateway's messages about req until its response or a
// payment_required; it fails t when neither comes.
func await(t *testing.T, cl *rawClient, req nostr.ID) heard {
	t.Helper()
	deadline := time.Now().Add(testwait.Timeout(30 * time.Second))
	var a heard
	for {
		m, ok := cl.next(req, deadline)
		if !ok {
			t.Fatalf("no answer to %s; heard %v", req, a.notes)
		}
		a.last = m
		if m.Method == "" || m.Method == contextvm.MethodPaymentRequired {
			return a
		}
		a.notes = append(a.notes, m.Method)
		if c := m.Tags.Find("change"); c != nil && m.Method == contextvm.MethodPaymentAccepted {
			a.change = c[2]
		}
	}
}

// rawSession is a raw client with a session open at the gateway.
func (w *cashuWorld) rawSession(t *testing.T) *rawClient {
	t.Helper()
	cl := newRawClient(t, w.relay)
	cl.initialize(w.pubkey)
	return cl
}

// send publishes req and awaits its answer.
func send(t *testing.T, cl *rawClient, req nostr.Event) heard {
	t.Helper()
	if err := cl.publish(req); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return await(t, cl, req.ID)
}

// wantHeld fails t unless alice's and the gateway's Cashu wallets hold
// alice and srv sats.
func (w *cashuWorld) wantHeld(t *testing.T, when string, alice, srv uint64) {
	t.Helper()
	if a, s := w.held(t); a != alice || s != srv {
		t.Fatalf("%s: alice holds %d, the gateway %d; want %d and %d", when, a, s, alice, srv)
	}
}

// A token already spent at the mint, sent as direct_payment, is rejected
// (payment_rejected) and followed by the normal flow (payment_required):
// the call does not run unpaid and the gateway gains nothing.
func TestPayGateway_CashuSpentTokenRejected(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	tok := w.token(t, "10")
	if code, out, errOut := w.c.run("cashu", "receive", tok); code != 0 { // spends it, back to alice
		t.Fatalf("cvm cashu receive: %d %s %s", code, out, errOut)
	}
	cl := w.rawSession(t)
	a := send(t, cl, w.directRequest(t, cl, tok))
	if a.ran() || !a.said(contextvm.MethodPaymentRejected) || a.last.Method != contextvm.MethodPaymentRequired {
		t.Fatalf("a spent token: heard %v then %+v", a.notes, a.last)
	}
	w.wantHeld(t, "after the spent token", 100, 0)
}

// A request event published again (to a gateway started again on the same
// data, as the relay gives a subscriber an event once) is answered from the stored result,
// and its token is redeemed once: the gateway gains the price once.
func TestPayGateway_CashuReplayedRequestRedeemsOnce(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	cl := w.rawSession(t)
	req := w.directRequest(t, cl, w.token(t, "10"))
	first := send(t, cl, req)
	// Paid exactly: the result alone says the token was taken.
	if !first.ran() || first.said(contextvm.MethodPaymentAccepted) || first.said(contextvm.MethodPaymentRejected) {
		t.Fatalf("the paid request: heard %v then %+v", first.notes, first.last)
	}
	// The relay hands an event it holds to a new subscriber only: the
	// gateway, started again on its data, hears the request once more.
	w.gateway.Stop(t, os.Interrupt)
	w.startGateway(t)
	cl.listen()
	again := send(t, cl, req)
	if string(again.last.Result) != string(first.last.Result) {
		t.Fatalf("the replay answered %+v; first %s", again.last, first.last.Result)
	}
	w.wantHeld(t, "after a request and its replay", 90, 10)
}

// Two requests racing with one token: one pays and runs, the other is
// rejected and its caller told; the gateway gains the price once.
func TestPayGateway_CashuTwoRequestsOneToken(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	tok := w.token(t, "10")
	cls := []*rawClient{w.rawSession(t), w.rawSession(t)}
	answers := make([]heard, len(cls))
	reqs := make([]nostr.Event, len(cls))
	for i, cl := range cls {
		reqs[i] = w.directRequest(t, cl, tok)
	}
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Go(func() {
			if err := cl.publish(reqs[i]); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
	}
	wg.Wait()
	for i, cl := range cls {
		answers[i] = await(t, cl, reqs[i].ID)
	}
	ran := 0
	for _, a := range answers {
		switch {
		case a.ran() && !a.said(contextvm.MethodPaymentRejected):
			ran++ // paid exactly: the result alone says the token was taken
		case a.ran() || !a.said(contextvm.MethodPaymentRejected):
			t.Fatalf("a racing request: heard %v then %+v", a.notes, a.last)
		}
	}
	if ran != 1 {
		t.Fatalf("%d of two requests with one token ran: %+v", ran, answers)
	}
	w.wantHeld(t, "after the race", 90, 10)
}

// A mint that is down when the gateway redeems: the call does not run and
// the client is told; once the mint is back on the same data, the token is
// still alice's (she can receive it) or its value is the gateway's, never
// lost from both.
func TestPayGateway_CashuMintDownWhenRedeeming(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	tok := w.token(t, "10")
	cl := w.rawSession(t)
	w.mintSim.Stop(t, os.Interrupt)
	a := send(t, cl, w.directRequest(t, cl, tok))
	if a.ran() || (a.last.Error == nil && !a.said(contextvm.MethodPaymentRejected)) {
		t.Fatalf("with the mint down: heard %v then %+v", a.notes, a.last)
	}
	w.restartMint(t)
	code, out, errOut := w.c.run("cashu", "receive", tok)
	alice, srv := w.held(t)
	if alice+srv != 100 {
		t.Fatalf("after the mint came back (receive: %d %s %s): alice holds %d, the gateway %d; want 100 between them", code, out, errOut, alice, srv)
	}
}

// A token worth more than the price (16 sats for 10) pays, and the
// gateway returns the rest as change on payment_accepted: alice's wallet,
// receiving it, is down by exactly the price, the gateway's up by it.
func TestPayGateway_CashuChangeReturned(t *testing.T) {
	w := newCashuWorld(t, cashuWorldOptions{})
	cl := w.rawSession(t)
	a := send(t, cl, w.directRequest(t, cl, w.token(t, "16")))
	if !a.ran() || a.change == "" {
		t.Fatalf("a token worth 16 for 10: heard %v then %+v, change %q", a.notes, a.last, a.change)
	}
	if code, out, errOut := w.c.run("cashu", "receive", a.change); code != 0 {
		t.Fatalf("cvm cashu receive the change: %d %s %s", code, out, errOut)
	}
	w.wantHeld(t, "after the change came back", 90, 10)
}
