package quotation

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/channel"
)

// What a Buyer keeps of its channels beside the open channel's payload
// (buyerChannelSpace, by endpoint URL): one record under endpointsKey,
// the endpoints it has had channels with, each with the open channel's
// times and the channels it closed and was refunded for, so that a
// client can list them (Channels) and tell "refunded" from "never had
// one". The store is one process's (a durable.File is locked), and the
// record is read and written under the Buyer's lock; two Buyers of one
// store in a process may lose each other's times, never a channel.

// endpointsKey is the record of the endpoints: no endpoint URL is
// without "://".
var endpointsKey = []byte("endpoints")

// keepRefunded bounds the refunded channels kept per endpoint.
const keepRefunded = 16

// endpointRecord is what a Buyer keeps of its channels with an endpoint.
type endpointRecord struct {
	Channel string           `json:"channel,omitempty"` // the open one's id, whose times these are
	Opened  time.Time        `json:"opened,omitzero"`
	LastUse time.Time        `json:"last_use,omitzero"`
	Closed  []refundedRecord `json:"closed,omitempty"`
}

// refundedRecord is a channel closed and refunded.
type refundedRecord struct {
	State    json.RawMessage `json:"state"` // NIP-4 answer payload
	Opened   time.Time       `json:"opened,omitzero"`
	LastUse  time.Time       `json:"last_use,omitzero"`
	ClosedAt time.Time       `json:"closed_at"`
	Owed     uint64          `json:"owed_msat"` // what was refunded
}

func loadEndpoints(ctx context.Context, st durable.Store) map[string]endpointRecord {
	out := map[string]endpointRecord{}
	if raw, ok, err := st.Get(ctx, buyerChannelSpace, endpointsKey); err == nil && ok {
		json.Unmarshal(raw, &out)
	}
	return out
}

// updateEndpoint changes the record of url with f and writes it.
func updateEndpoint(ctx context.Context, st durable.Store, url string, f func(*endpointRecord)) error {
	all := loadEndpoints(ctx, st)
	rec := all[url]
	f(&rec)
	all[url] = rec
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	return st.Put(ctx, buyerChannelSpace, endpointsKey, b, time.Now().Add(buyerChannelKeep))
}

// used records a use of the open channel s with url, now.
func used(rec *endpointRecord, s channel.State, now time.Time) {
	if id := s.Channel.String(); rec.Channel != id {
		rec.Channel, rec.Opened = id, now
	}
	rec.LastUse = now
}

// refunded moves the open channel's times to a closed channel s, its
// refund (s.Owed) paid.
func refunded(rec *endpointRecord, s channel.State, now time.Time) {
	p := s.Answer(0)
	b, err := channel.MarshalPayload(&p)
	if err != nil {
		return
	}
	r := refundedRecord{State: b, ClosedAt: now, Owed: s.Owed}
	if rec.Channel == s.Channel.String() {
		r.Opened, r.LastUse = rec.Opened, rec.LastUse
		rec.Channel, rec.Opened, rec.LastUse = "", time.Time{}, time.Time{}
	}
	rec.Closed = append(rec.Closed, r)
	if n := len(rec.Closed) - keepRefunded; n > 0 {
		rec.Closed = slices.Delete(rec.Closed, 0, n)
	}
}

// Channels are the channels that Buyers paying from store st (their
// Pay.Channel.Store) have had, by endpoint URL: the open one first, with
// its deposit, what was spent and its times, then the ones closed and
// refunded (Closed, Refund channel.RefundPaid, Owed what came back).
func Channels(ctx context.Context, st durable.Store) map[string][]channel.State {
	out := map[string][]channel.State{}
	for url, rec := range loadEndpoints(ctx, st) {
		var states []channel.State
		if s, ok := openChannel(ctx, st, url); ok {
			if rec.Channel == s.Channel.String() {
				s.Opened, s.LastUse = rec.Opened, rec.LastUse
			}
			states = append(states, s)
		}
		for _, c := range slices.Backward(rec.Closed) {
			s, err := channel.StateOfJSON(c.State)
			if err != nil {
				continue
			}
			s.Opened, s.LastUse, s.ClosedAt = c.Opened, c.LastUse, c.ClosedAt
			s.Closed, s.Owed, s.Refund = true, c.Owed, channel.RefundPaid
			states = append(states, s)
		}
		if len(states) > 0 {
			out[url] = states
		}
	}
	return out
}

// openChannel is the open channel with url in st, as a Buyer keeps it.
func openChannel(ctx context.Context, st durable.Store, url string) (channel.State, bool) {
	raw, ok, err := st.Get(ctx, buyerChannelSpace, []byte(url))
	if err != nil || !ok || len(raw) == 0 {
		return channel.State{}, false
	}
	s, err := channel.StateOfJSON(raw)
	return s, err == nil
}
