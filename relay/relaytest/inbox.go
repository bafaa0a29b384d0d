package relaytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// Inbox watches, on one relay, the events addressed to a public key (a p
// tag naming it), as the key's owner would receive them: what a client
// sent a server, say. It is closed when the test ends.
type Inbox struct {
	tb     testing.TB
	pool   *nostrx.Pool
	sub    *nostrx.Subscription
	key    nostr.PubKey
	marker nostr.SecretKey
}

// WatchInbox subscribes on relayURL to the events of the given kinds
// addressed to key, and returns once the subscription is live: everything
// published from then on is seen.
func WatchInbox(tb testing.TB, relayURL string, key nostr.PubKey, kinds ...nostr.Kind) *Inbox {
	tb.Helper()
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	tb.Cleanup(func() { p.Close() })
	// Kind 1 carries Take's markers.
	sub := p.Subscribe(nostr.Filter{Kinds: append([]nostr.Kind{1}, kinds...), Tags: nostr.TagMap{"p": {key.Hex()}}, Since: nostr.Now() - 5}, 1024)
	tb.Cleanup(sub.Close)
	<-sub.Ready()
	return &Inbox{tb: tb, pool: p, sub: sub, key: key, marker: nostr.Generate()}
}

// Next waits up to timeout for the next event, and fails the test without
// one.
func (in *Inbox) Next(timeout time.Duration) nostr.Event {
	in.tb.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e := <-in.sub.Events():
			if e.PubKey != in.marker.Public() {
				return e
			}
		case <-deadline:
			in.tb.Fatalf("relaytest: nothing addressed to %s within %s", in.key.Hex(), timeout)
		}
	}
}

// Take returns the events that arrived since the last Take (or Next). It
// publishes a marker and reads up to it: the relay delivers in the order
// it accepted, so everything published before Take was called is in, with
// no wait on a clock.
func (in *Inbox) Take() []nostr.Event {
	in.tb.Helper()
	m := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: fmt.Sprint("marker ", time.Now().UnixNano()), Tags: nostr.Tags{{"p", in.key.Hex()}}}
	if err := m.Sign(in.marker); err != nil {
		in.tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.pool.Publish(ctx, m); err != nil {
		in.tb.Fatalf("relaytest: publishing a marker: %v", err)
	}
	var got []nostr.Event
	for {
		select {
		case e := <-in.sub.Events():
			if e.ID == m.ID {
				return got
			}
			if e.PubKey != in.marker.Public() {
				got = append(got, e)
			}
		case <-ctx.Done():
			in.tb.Fatal("relaytest: the marker never came back")
		}
	}
}
