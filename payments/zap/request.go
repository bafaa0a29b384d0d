package zap

import (
	"encoding/json"
	"fmt"
	"strconv"

	"fiatjaf.com/nostr"
)

// KindRequest and KindReceipt are NIP-57's zap request and zap receipt.
const (
	KindRequest nostr.Kind = 9734
	KindReceipt nostr.Kind = 9735
)

// maxRequest bounds a zap request's JSON: an event with a few relays.
const maxRequest = 16 << 10

// maxRelays bounds the relays a zap request names, and so where a
// receipt is published.
const maxRelays = 16

// NewRequest makes the zap request of a payment, unsigned: amount, the
// relays the receipt goes to, and p, the recipient, which the reference
// SDK sets to the endpoint's nostrPubkey (an address has no other key).
func NewRequest(amountMsat int64, recipient nostr.PubKey, relays []string, now nostr.Timestamp) nostr.Event {
	return nostr.Event{
		Kind: KindRequest, CreatedAt: now, Content: "",
		Tags: nostr.Tags{
			append(nostr.Tag{"relays"}, relays...),
			{"amount", strconv.FormatInt(amountMsat, 10)},
			{"p", recipient.Hex()},
		},
	}
}

// Request is a zap request read from its JSON.
type Request struct {
	Event      nostr.Event
	AmountMsat int64 // 0 when it names none
	Recipient  nostr.PubKey
	Relays     []string
}

// ParseRequest reads a zap request as an LNURL server must (NIP-57,
// appendix D): a signed kind 9734 event with exactly one p tag, at most
// one e tag, a relays tag, and an amount tag, if any, that is a whole
// number of millisatoshis.
func ParseRequest(s string) (Request, error) {
	if len(s) > maxRequest {
		return Request{}, fmt.Errorf("%w: longer than %d bytes", ErrRequest, maxRequest)
	}
	var evt nostr.Event
	if err := json.Unmarshal([]byte(s), &evt); err != nil {
		return Request{}, fmt.Errorf("%w: not an event: %v", ErrRequest, err)
	}
	if evt.Kind != KindRequest {
		return Request{}, fmt.Errorf("%w: kind %d, not %d", ErrRequest, evt.Kind, KindRequest)
	}
	if !evt.CheckID() || !evt.VerifySignature() {
		return Request{}, fmt.Errorf("%w: bad id or signature", ErrRequest)
	}
	r := Request{Event: evt}
	var ps, es, relays, amounts int
	for _, t := range evt.Tags {
		if len(t) == 0 {
			continue
		}
		switch t[0] {
		case "p":
			ps++
			if len(t) < 2 {
				return Request{}, fmt.Errorf("%w: an empty p tag", ErrRequest)
			}
			pk, err := nostr.PubKeyFromHex(t[1])
			if err != nil {
				return Request{}, fmt.Errorf("%w: p tag: %v", ErrRequest, err)
			}
			r.Recipient = pk
		case "e":
			es++
		case "relays":
			relays++
			r.Relays = t[1:]
		case "amount":
			amounts++
			if len(t) < 2 {
				return Request{}, fmt.Errorf("%w: an empty amount tag", ErrRequest)
			}
			n, err := strconv.ParseInt(t[1], 10, 64)
			if err != nil || n <= 0 {
				return Request{}, fmt.Errorf("%w: amount %.40q is not a positive number of msat", ErrRequest, t[1])
			}
			r.AmountMsat = n
		}
	}
	switch {
	case ps != 1:
		return Request{}, fmt.Errorf("%w: %d p tags, want 1", ErrRequest, ps)
	case es > 1:
		return Request{}, fmt.Errorf("%w: %d e tags, want at most 1", ErrRequest, es)
	case relays != 1 || len(r.Relays) == 0:
		return Request{}, fmt.Errorf("%w: no relays tag to publish the receipt to", ErrRequest)
	case len(r.Relays) > maxRelays:
		return Request{}, fmt.Errorf("%w: %d relays, at most %d", ErrRequest, len(r.Relays), maxRelays)
	case amounts > 1:
		return Request{}, fmt.Errorf("%w: %d amount tags", ErrRequest, amounts)
	}
	return r, nil
}
