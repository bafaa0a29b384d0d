package cep8

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/channel"
)

// payerRecord is what a Payer keeps of its channels with one server, in
// channelSpace under the server's key: the open channel, and the closed
// ones, whose refund may still be owed. A channel the server closed (idle
// past its TTL) stays here, owed, until the refund is claimed: the money
// in it is the client's, and nothing else remembers it.
type payerRecord struct {
	Open    json.RawMessage `json:"open,omitempty"` // NIP-4 answer payload of its state
	Opened  time.Time       `json:"opened,omitzero"`
	LastUse time.Time       `json:"last_use,omitzero"`
	Closed  []closedChannel `json:"closed,omitempty"`
	// Costs are what the server last named as each capability's price
	// (msat): a process that starts knows its receipts' amounts.
	Costs map[string]channel.Amount `json:"costs,omitempty"`
}

// closedChannel is a closed channel: its last state and whether its
// refund was paid.
type closedChannel struct {
	State    json.RawMessage `json:"state"` // NIP-4 answer payload
	Opened   time.Time       `json:"opened,omitzero"`
	LastUse  time.Time       `json:"last_use,omitzero"`
	ClosedAt time.Time       `json:"closed_at"`
	Refunded bool            `json:"refunded,omitempty"`
}

// keepRefunded bounds the refunded channels kept per server, for the
// record (cvm channels); owed ones are never dropped.
const keepRefunded = 16

// indexKey names the record of the servers a payer has channels with: no
// server's key is 6 bytes long.
var indexKey = []byte("server")

// loadLocked reads the record of the channels with server; ch.mu held. A
// record written before closed channels were kept is the open channel's
// payload alone.
func (ch *channels) loadLocked(ctx context.Context, server nostr.PubKey) payerRecord {
	raw, ok, err := ch.store.Get(ctx, channelSpace, server[:])
	if err != nil || !ok || len(raw) == 0 {
		return payerRecord{}
	}
	var rec payerRecord
	if json.Unmarshal(raw, &rec) != nil {
		return payerRecord{}
	}
	if rec.Open == nil && rec.Closed == nil && bytes.Contains(raw, []byte(`"subRav"`)) {
		rec.Open = raw
	}
	return rec
}

// saveLocked writes rec, and server into the index; ch.mu held.
func (ch *channels) saveLocked(ctx context.Context, server nostr.PubKey, rec payerRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := ch.store.Put(ctx, channelSpace, server[:], b, time.Now().Add(channelKeep)); err != nil {
		return err
	}
	servers := ch.serversLocked(ctx)
	if slices.Contains(servers, server) {
		return nil
	}
	hexes := make([]string, 0, len(servers)+1)
	for _, s := range append(servers, server) {
		hexes = append(hexes, s.Hex())
	}
	idx, _ := json.Marshal(hexes)
	// Written only when a server joins it, the index outlives every record
	// it names; a name whose record expired reads as no channels.
	return ch.store.Put(ctx, channelSpace, indexKey, idx, time.Now().Add(10*channelKeep))
}

// serversLocked are the servers this payer has had channels with; ch.mu
// held.
func (ch *channels) serversLocked(ctx context.Context) []nostr.PubKey {
	raw, ok, err := ch.store.Get(ctx, channelSpace, indexKey)
	if err != nil || !ok {
		return nil
	}
	var hexes []string
	json.Unmarshal(raw, &hexes)
	var out []nostr.PubKey
	for _, h := range hexes {
		if pk, err := nostr.PubKeyFromHex(h); err == nil {
			out = append(out, pk)
		}
	}
	return out
}

// markClosed moves the channel of state s (closed: by the server, or by
// this client with its refund paid) from open to closed in rec.
func (rec *payerRecord) markClosed(s channel.State, refunded bool, now time.Time) {
	if open, ok := stateOfPayload(rec.Open); ok && open.Channel == s.Channel {
		rec.Open = nil
	}
	for i := range rec.Closed {
		if c, ok := stateOfPayload(rec.Closed[i].State); ok && c.Channel == s.Channel {
			rec.Closed[i].Refunded = rec.Closed[i].Refunded || refunded
			return
		}
	}
	p := s.Answer(0)
	b, err := channel.MarshalPayload(&p)
	if err != nil {
		return
	}
	rec.Closed = append(rec.Closed, closedChannel{State: b, Opened: rec.Opened, LastUse: rec.LastUse, ClosedAt: now, Refunded: refunded})
	// The oldest refunded ones go first; owed ones stay.
	for n := 0; len(rec.Closed) > keepRefunded && n < len(rec.Closed); n++ {
		if rec.Closed[n].Refunded {
			rec.Closed = slices.Delete(rec.Closed, n, n+1)
			n--
		}
	}
}

// states are the channels of rec, the open one first, each with its times
// and, when closed, what is owed and whether it was refunded.
func (rec *payerRecord) states() []channel.State {
	var out []channel.State
	if s, ok := stateOfPayload(rec.Open); ok {
		s.Opened, s.LastUse = rec.Opened, rec.LastUse
		out = append(out, s)
	}
	for _, c := range rec.Closed {
		s, ok := stateOfPayload(c.State)
		if !ok {
			continue
		}
		s.Opened, s.LastUse, s.ClosedAt = c.Opened, c.LastUse, c.ClosedAt
		s.Closed, s.Owed, s.Refund = true, s.Deposit-min(s.Accumulated, s.Deposit), channel.RefundNone
		if c.Refunded {
			s.Refund = channel.RefundPaid
		}
		out = append(out, s)
	}
	return out
}

// stateOfPayload reads a stored payload.
func stateOfPayload(raw json.RawMessage) (channel.State, bool) {
	if raw == nil {
		return channel.State{}, false
	}
	s, err := channel.StateOfJSON(raw)
	return s, err == nil
}
