package quotation

import (
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/channel"
)

// The record of an endpoint's channels keeps the open one's times, moves
// them to a channel once it is refunded, lists the refunded newest first,
// and keeps only the last keepRefunded of them.
func TestChannelRecord_TimesAndRefunded(t *testing.T) {
	ctx := t.Context()
	st := durable.NewMemory(durable.Options{})
	const url = "http://127.0.0.1:1/mcp"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := keepRefunded + 3
	for i := range n {
		s := channel.State{Channel: channel.ID{byte(i + 1)}, Fragment: "key-1", Deposit: 80_000, Accumulated: uint64(i) * 1000, Nonce: uint64(i)}
		opened, last := t0.Add(time.Duration(i)*time.Hour), t0.Add(time.Duration(i)*time.Hour+time.Minute)
		for _, at := range []time.Time{opened, last} {
			if err := updateEndpoint(ctx, st, url, func(rec *endpointRecord) { used(rec, s, at) }); err != nil {
				t.Fatal(err)
			}
		}
		s.Closed, s.Owed = true, s.Deposit-s.Accumulated
		if err := updateEndpoint(ctx, st, url, func(rec *endpointRecord) { refunded(rec, s, last) }); err != nil {
			t.Fatal(err)
		}
	}
	got := Channels(ctx, st)[url]
	if len(got) != keepRefunded {
		t.Fatalf("%d channels listed; want the last %d refunded", len(got), keepRefunded)
	}
	for k, s := range got {
		i := n - 1 - k
		if s.Channel != (channel.ID{byte(i + 1)}) || !s.Closed || s.Refund != channel.RefundPaid || s.Owed != 80_000-uint64(i)*1000 ||
			!s.Opened.Equal(t0.Add(time.Duration(i)*time.Hour)) || !s.LastUse.Equal(t0.Add(time.Duration(i)*time.Hour+time.Minute)) {
			t.Errorf("channel %d: %+v; want channel %d refunded %d msat with its times", k, s, i+1, 80_000-i*1000)
		}
	}
}
