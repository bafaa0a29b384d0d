package zap_test

import (
	"errors"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/zap"
)

// Expect.Check settles a payment on its own receipt only: each way a
// receipt can differ from it is refused.
func TestExpect_CheckRefusesEveryOtherReceipt(t *testing.T) {
	f := newFixture(t)
	zr, desc := f.zapRequest(t, 10_000, f.key)
	pr := f.invoice(t, 10_000, desc)
	want := zap.Expect{Bolt11: pr, Zapper: f.zapper.Public(), RequestID: zr.Event.ID, AmountMsat: 10_000}
	sign := func(evt nostr.Event, sk nostr.SecretKey) nostr.Event {
		if err := evt.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return evt
	}
	good := sign(zap.NewReceipt(zr, desc, pr, "", nostr.Now()), f.zapper)
	if err := want.Check(good); err != nil {
		t.Fatalf("its own receipt: %v", err)
	}
	otherZR, otherDesc := f.zapRequest(t, 10_000, f.key)
	smallZR, smallDesc := f.zapRequest(t, 5_000, f.key)
	tampered := good
	tampered.Tags = append(nostr.Tags{}, good.Tags...)
	tampered.Tags = append(tampered.Tags, nostr.Tag{"extra", "x"})
	for name, evt := range map[string]nostr.Event{
		"signed by another key":    sign(zap.NewReceipt(zr, desc, pr, "", nostr.Now()), nostr.Generate()),
		"for another invoice":      sign(zap.NewReceipt(zr, desc, f.invoice(t, 10_000, desc), "", nostr.Now()), f.zapper),
		"for a smaller amount":     sign(zap.NewReceipt(smallZR, smallDesc, f.invoice(t, 5_000, smallDesc), "", nostr.Now()), f.zapper),
		"of a smaller zap request": sign(zap.NewReceipt(smallZR, smallDesc, pr, "", nostr.Now()), f.zapper),
		"of another zap request":   sign(zap.NewReceipt(otherZR, otherDesc, pr, "", nostr.Now()), f.zapper),
		"tampered after signing":   tampered,
		"not a receipt":            sign(nostr.Event{Kind: zap.KindRequest, CreatedAt: nostr.Now(), Tags: good.Tags}, f.zapper),
	} {
		if err := want.Check(evt); !errors.Is(err, zap.ErrReceipt) {
			t.Errorf("a receipt %s: %v; want ErrReceipt", name, err)
		}
	}
}

// An LNURL server reads a zap request as NIP-57's appendix D says.
func TestParseRequest_RefusesWhatAnLNURLServerMust(t *testing.T) {
	sk := nostr.Generate()
	p := nostr.Generate().Public().Hex()
	for name, tags := range map[string]nostr.Tags{
		"no p tag":        {{"relays", "ws://127.0.0.1:1"}, {"amount", "1000"}},
		"two p tags":      {{"relays", "ws://127.0.0.1:1"}, {"p", p}, {"p", p}},
		"two e tags":      {{"relays", "ws://127.0.0.1:1"}, {"p", p}, {"e", "a"}, {"e", "b"}},
		"no relays":       {{"p", p}, {"amount", "1000"}},
		"a bad amount":    {{"relays", "ws://127.0.0.1:1"}, {"p", p}, {"amount", "-5"}},
		"a p not a key":   {{"relays", "ws://127.0.0.1:1"}, {"p", "zz"}},
		"two amount tags": {{"relays", "ws://127.0.0.1:1"}, {"p", p}, {"amount", "1"}, {"amount", "2"}},
	} {
		evt := nostr.Event{Kind: zap.KindRequest, CreatedAt: nostr.Now(), Tags: tags}
		if err := evt.Sign(sk); err != nil {
			t.Fatal(err)
		}
		if _, err := zap.ParseRequest(evt.String()); !errors.Is(err, zap.ErrRequest) {
			t.Errorf("%s: %v; want ErrRequest", name, err)
		}
	}
}
