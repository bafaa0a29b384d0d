package zap

import (
	"crypto/sha256"
	"fmt"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// NewReceipt makes the zap receipt an LNURL server publishes once the
// invoice bolt11, made for the zap request zr (its JSON, as received), is
// paid, unsigned: p (and e, if any) as in the request, P its signer,
// bolt11, description (zr) and the preimage; created at paidAt.
func NewReceipt(zr Request, description, bolt11, preimage string, paidAt nostr.Timestamp) nostr.Event {
	tags := nostr.Tags{{"p", zr.Recipient.Hex()}, {"P", zr.Event.PubKey.Hex()}}
	if e := zr.Event.Tags.Find("e"); len(e) >= 2 {
		tags = append(tags, nostr.Tag{"e", e[1]})
	}
	tags = append(tags, nostr.Tag{"bolt11", bolt11}, nostr.Tag{"description", description})
	if preimage != "" {
		tags = append(tags, nostr.Tag{"preimage", preimage})
	}
	return nostr.Event{Kind: KindReceipt, CreatedAt: paidAt, Tags: tags}
}

// Receipt is a zap receipt read from its event.
type Receipt struct {
	Event       nostr.Event
	Bolt11      string
	Description string // the zap request's JSON
	Request     Request
}

// ParseReceipt reads a zap receipt: kind 9735, one bolt11 and one
// description tag, the description a valid zap request. It checks neither
// the event's signature nor who signed it: Expect.Check does.
func ParseReceipt(evt nostr.Event) (Receipt, error) {
	if evt.Kind != KindReceipt {
		return Receipt{}, fmt.Errorf("%w: kind %d, not %d", ErrReceipt, evt.Kind, KindReceipt)
	}
	r := Receipt{Event: evt}
	var bolts, descs int
	for _, t := range evt.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "bolt11":
			bolts++
			r.Bolt11 = t[1]
		case "description":
			descs++
			r.Description = t[1]
		}
	}
	if bolts != 1 || descs != 1 {
		return Receipt{}, fmt.Errorf("%w: %d bolt11 and %d description tags, want one of each", ErrReceipt, bolts, descs)
	}
	zr, err := ParseRequest(r.Description)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: its description: %w", ErrReceipt, err)
	}
	r.Request = zr
	return r, nil
}

// Expect is the payment a receipt must settle.
type Expect struct {
	Bolt11     string
	Zapper     nostr.PubKey // the LNURL endpoint's nostrPubkey
	RequestID  nostr.ID     // the zap request's id
	AmountMsat int64
}

// Check reports whether evt settles e: a receipt signed by e.Zapper, for
// the invoice e.Bolt11, whose description is the zap request e.RequestID
// (the SHA-256 of the description being the invoice's description hash)
// for exactly e.AmountMsat.
func (e Expect) Check(evt nostr.Event) error {
	if evt.PubKey != e.Zapper {
		return fmt.Errorf("%w: signed by %s, not the address's nostrPubkey %s", ErrReceipt, evt.PubKey.Hex(), e.Zapper.Hex())
	}
	if !evt.CheckID() || !evt.VerifySignature() {
		return fmt.Errorf("%w: bad id or signature", ErrReceipt)
	}
	r, err := ParseReceipt(evt)
	if err != nil {
		return err
	}
	if r.Bolt11 != e.Bolt11 {
		return fmt.Errorf("%w: it is for another invoice", ErrReceipt)
	}
	if r.Request.Event.ID != e.RequestID {
		return fmt.Errorf("%w: it carries another zap request (%s)", ErrReceipt, r.Request.Event.ID.Hex())
	}
	if r.Request.AmountMsat != e.AmountMsat {
		return fmt.Errorf("%w: its zap request is for %d msat, not %d", ErrReceipt, r.Request.AmountMsat, e.AmountMsat)
	}
	inv, err := bolt11.Parse(r.Bolt11)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrReceipt, err)
	case inv.AmountMsat() != e.AmountMsat:
		return fmt.Errorf("%w: its invoice is for %d msat, not %d", ErrReceipt, inv.AmountMsat(), e.AmountMsat)
	case inv.DescriptionHash == nil || *inv.DescriptionHash != sha256.Sum256([]byte(r.Description)):
		return fmt.Errorf("%w: the SHA-256 of its description is not the invoice's description hash", ErrReceipt)
	}
	return nil
}
