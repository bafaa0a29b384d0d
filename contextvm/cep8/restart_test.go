package cep8_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// restartable is a paying server over a durable store in dir that can be
// stopped and started again with the same key and store.
type restartable struct {
	t     *testing.T
	f     *peertest.PayFixture
	dir   string
	sk    nostr.SecretKey
	srv   *contextvm.Server
	state *durable.File
}

func (r *restartable) start() *contextvm.Server {
	state, err := durable.Open(r.dir, r.sk.Public().Hex(), durable.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	opts := r.f.ServerOptions(0)
	opts.Signer, opts.State = contextvm.NewKeySigner(r.sk), state
	opts.Encryption = contextvm.EncryptOptional
	r.srv, r.state = peertest.Serve(r.t, opts, peertest.CounterServer(&r.f.Calls)), state
	return r.srv
}

func (r *restartable) stop() {
	r.srv.Close()
	r.state.Close()
}

// askedToPay has a fresh peer call count on srv and returns the peer, its
// request and the payment_required it was answered with.
func askedToPay(t *testing.T, relayURL string, srv *contextvm.Server) (*peertest.RawPeer, nostr.Event, payments.PaymentRequired) {
	t.Helper()
	peer := peertest.NewRawPeer(t, relayURL)
	peer.Initialize(srv.PublicKey())
	req := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	peer.Publish(req)
	_, m := peertest.NextMessage(t, peer)
	if peertest.Method(m) != contextvm.MethodPaymentRequired {
		t.Fatalf("first answer %v", m)
	}
	pr, _, err := contextvm.ParsePaymentRequired(m["params"])
	if err != nil {
		t.Fatal(err)
	}
	return peer, req, pr
}

// drainUntil reads the peer's messages until one for which ok holds.
func drainUntil(t *testing.T, p *peertest.RawPeer, ok func(m map[string]json.RawMessage) bool) {
	t.Helper()
	for {
		if _, m := peertest.NextMessage(t, p); ok(m) {
			return
		}
	}
}

// A payment asked for (transparent) before a restart and made while the
// server was down is credited when the same request event is replayed
// after the restart: the payment request on record is verified, not a new
// one issued; the tool runs once, the client pays once, and a later replay
// is answered from the stored result.
func TestPayRestart_TransparentPaidWhileDownCreditedOnReplay(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	rs := &restartable{t: t, f: f, dir: t.TempDir(), sk: nostr.Generate()}
	srv := rs.start()
	peer, req, pr := askedToPay(t, f.Relay.URL, srv)
	rs.stop()
	// The server said it is shutting down; it did not reject the payment.
	drainUntil(t, peer, func(m map[string]json.RawMessage) bool {
		if peertest.Method(m) == contextvm.MethodPaymentRejected {
			t.Fatalf("payment rejected on shutdown: %s", m["params"])
		}
		return strings.Contains(string(m["error"]), "shutting down")
	})
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), pr, 10); err != nil {
		t.Fatal(err)
	}

	rs.start()
	defer rs.stop()
	peer.Publish(req)
	var result json.RawMessage
	for result == nil {
		_, m := peertest.NextMessage(t, peer)
		switch peertest.Method(m) {
		case contextvm.MethodPaymentRequired:
			again, _, _ := contextvm.ParsePaymentRequired(m["params"])
			if again.PayReq != pr.PayReq {
				t.Fatalf("a new payment request after the restart: %s, was %s", again.PayReq, pr.PayReq)
			}
		case contextvm.MethodPaymentAccepted:
		case "":
			if m["error"] != nil {
				t.Fatalf("replay after restart answered %s", m["error"])
			}
			result = m["result"]
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
	if !strings.Contains(string(result), `"text":"1"`) {
		t.Fatalf("result %s", result)
	}
	// The relay pool drops an event id it has just delivered: the same
	// request event comes again in a gift wrap.
	wrap, err := contextvm.Wrap(req, rs.srv.PublicKey(), contextvm.KindGiftWrap)
	if err != nil {
		t.Fatal(err)
	}
	peer.Publish(wrap)
	if _, m := peertest.NextMessage(t, peer); string(m["result"]) != string(result) {
		t.Fatalf("a later replay answered %v", m)
	}
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances alice %d srv %d, %d runs; want 90, 10, 1", a, s, f.Calls.Load())
	}
}

// Explicit gating: a -32042 payment made while the server restarts is
// verified when the client sends the request again after the restart
// (-32043 while verifying, then the result), never asked for twice; the
// grant is spent once.
func TestPayRestart_ExplicitGrantPaidWhileDownCredited(t *testing.T) {
	f := peertest.NewPayFixture(t, 100)
	rs := &restartable{t: t, f: f, dir: t.TempDir(), sk: nostr.Generate()}
	srv := rs.start()
	peer := peertest.NewRawPeer(t, f.Relay.URL)
	explicit := nostr.Tag{"payment_interaction", "explicit_gating"}
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, explicit))
	peertest.NextMessage(t, peer)
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	send := func(id int) (*jsonrpc.Error, json.RawMessage) {
		t.Helper()
		peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":`+peertest.JSONInt(id)+`,"method":"tools/call","params":{"name":"count","arguments":{}}}`, explicit))
		for {
			_, m := peertest.NextMessage(t, peer)
			if string(m["id"]) != peertest.JSONInt(id) {
				continue // the shutdown's answers
			}
			if m["error"] == nil {
				return nil, m["result"]
			}
			var e jsonrpc.Error
			json.Unmarshal(m["error"], &e)
			return &e, nil
		}
	}
	e, _ := send(1)
	opts, ok := contextvm.IsPaymentRequired(e)
	if !ok {
		t.Fatalf("first answer %v", e)
	}
	rs.stop()
	if _, err := (&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}).Pay(context.Background(), opts[0], 10); err != nil {
		t.Fatal(err)
	}
	rs.start()
	defer rs.stop()
	var result json.RawMessage
	for id := 2; result == nil; id++ {
		e, result = send(id)
		if e != nil && e.Code != contextvm.CodePaymentPending {
			t.Fatalf("after the restart, call %d answered %d %s", id, e.Code, e.Message)
		}
	}
	if !strings.Contains(string(result), `"text":"1"`) {
		t.Fatalf("result %s", result)
	}
	e, _ = send(100)
	again, ok := contextvm.IsPaymentRequired(e)
	if !ok || again[0].PayReq == opts[0].PayReq {
		t.Fatalf("the spent grant's payment was asked for again, or the grant used twice: %v", e)
	}
	if a, s := f.Balances(t); a != 90 || s != 10 || f.Calls.Load() != 1 {
		t.Fatalf("balances alice %d srv %d, %d runs; want 90, 10, 1", a, s, f.Calls.Load())
	}
}
