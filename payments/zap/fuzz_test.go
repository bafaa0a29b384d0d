package zap_test

import (
	"encoding/json"
	"errors"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/zap"
)

// An LNURL-pay endpoint's answer is a stranger's bytes: read without a
// panic, and never taken without allowsNostr and a nostrPubkey.
func FuzzParsePayParams(f *testing.F) {
	f.Add([]byte(`{"tag":"payRequest","callback":"https://a.example/cb","minSendable":1000,"maxSendable":2000,"metadata":"[]","allowsNostr":true,"nostrPubkey":"` + nostr.Generate().Public().Hex() + `"}`))
	f.Add([]byte(`{"status":"ERROR","reason":"no"}`))
	f.Add([]byte(`{"tag":"payRequest","allowsNostr":"true"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := zap.ParsePayParams(b)
		if err != nil {
			if !errors.Is(err, zap.ErrPayParams) {
				t.Fatalf("an error that is not ErrPayParams: %v", err)
			}
			return
		}
		var j struct {
			AllowsNostr bool `json:"allowsNostr"`
		}
		if json.Unmarshal(b, &j) != nil || !j.AllowsNostr || p.NostrPubkey == (nostr.PubKey{}) || p.MinSendable < 0 || p.MaxSendable < 0 {
			t.Fatalf("accepted %q as %+v", b, p)
		}
	})
}

// So is a callback's answer.
func FuzzParseCallbackAnswer(f *testing.F) {
	f.Add([]byte(`{"pr":"lnbc1","routes":[]}`))
	f.Add([]byte(`{"status":"ERROR","reason":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if pr, err := zap.ParseCallbackAnswer(b); err == nil && pr == "" {
			t.Fatal("an empty invoice accepted")
		}
	})
}

// A zap request (read by an LNURL server, and by a client from _meta) and
// a zap receipt (read by the server from relays) are strangers' events:
// read without a panic; a receipt that Check accepts is one of the
// expected payment.
func FuzzReceipt(f *testing.F) {
	sk := nostr.Generate()
	zr := zap.NewRequest(1000, sk.Public(), []string{"ws://127.0.0.1:1"}, 1)
	_ = zr.Sign(sk)
	b, _ := json.Marshal(zr)
	rec := zap.NewReceipt(zap.Request{Event: zr, Recipient: sk.Public()}, string(b), "lnbc1", "", 2)
	_ = rec.Sign(sk)
	rb, _ := json.Marshal(rec)
	f.Add(string(b), string(rb))
	f.Add(`{"kind":9734}`, `{"kind":9735,"tags":[["bolt11","x"],["description","{}"]]}`)
	want := zap.Expect{Bolt11: "lnbc1", Zapper: sk.Public(), RequestID: zr.ID, AmountMsat: 1000}
	f.Fuzz(func(t *testing.T, request, receipt string) {
		if r, err := zap.ParseRequest(request); err == nil && (r.Event.Kind != zap.KindRequest || len(r.Relays) == 0) {
			t.Fatalf("accepted %q as %+v", request, r)
		}
		var evt nostr.Event
		if json.Unmarshal([]byte(receipt), &evt) != nil {
			return
		}
		if r, err := zap.ParseReceipt(evt); err == nil && r.Bolt11 == "" && r.Description == "" {
			t.Fatalf("a receipt without bolt11 or description: %+v", r)
		}
		if err := want.Check(evt); err == nil {
			t.Fatalf("a made-up receipt settles the payment: %s", receipt)
		}
	})
}
