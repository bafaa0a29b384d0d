package nostrx_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// Query waits for every relay's EOSE, merges what they hold and returns
// each event once.
func TestPool_QueryMergesRelays(t *testing.T) {
	r1, r2 := relaytest.Start(t, relay.Options{}), relaytest.Start(t, relay.Options{})
	author := nostr.Generate()
	a, b, both := signed(t, author, 1, "only on r1"), signed(t, author, 1, "only on r2"), signed(t, author, 1, "on both")
	for url, evts := range map[string][]nostr.Event{r1.URL: {a, both}, r2.URL: {b, both}} {
		p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{url}})
		for _, e := range evts {
			if err := p.Publish(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
	p := newPool(t, nostrx.PoolOptions{Relays: []string{r1.URL, r2.URL}})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	got, err := p.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{author.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[nostr.ID]int{}
	for _, e := range got {
		ids[e.ID]++
	}
	if len(got) != 3 || ids[a.ID] != 1 || ids[b.ID] != 1 || ids[both.ID] != 1 {
		t.Fatalf("query returned %d events: %v", len(got), ids)
	}
	if ctx.Err() != nil {
		t.Fatal("Query waited for its deadline although every relay had answered")
	}
}

// A relay that never answers delays Query to its deadline but does not
// fail it; with no relay answering, Query fails.
func TestPool_QueryWithADeadRelay(t *testing.T) {
	good := relaytest.Start(t, relay.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	author := nostr.Generate()
	evt := signed(t, author, 1, "stored")
	p := newPool(t, nostrx.PoolOptions{Relays: []string{"ws://" + ln.Addr().String(), good.URL}})
	if err := p.Publish(context.Background(), evt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	got, err := p.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{author.Public()}})
	if err != nil || len(got) != 1 || got[0].ID != evt.ID {
		t.Fatalf("query = %d events, %v", len(got), err)
	}

	dead := newPool(t, nostrx.PoolOptions{Relays: []string{"ws://" + ln.Addr().String()}})
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := dead.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{author.Public()}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("query of a dead relay: %v, want the deadline", err)
	}
}
