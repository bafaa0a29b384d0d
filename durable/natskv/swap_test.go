package natskv_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable/natskv"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
)

// Swap changes a record only from what it holds, across connections:
// nothing (or an expired record) for a nil old, the very bytes otherwise.
func TestStore_SwapOnlyFromWhatIsThere(t *testing.T) {
	srv := natstest.Start(t)
	a, b := open(t, srv.URL(), "swap"), open(t, srv.URL(), "swap")
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	k, exp := []byte("ch"), time.Now().Add(time.Minute)
	swap := func(s *natskv.Store, old []byte, value string) bool {
		t.Helper()
		ok, err := s.Swap(ctx, "channel", k, old, []byte(value), exp)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !swap(a, nil, "v1") || swap(b, nil, "v1b") {
		t.Fatal("swap into an absent record: want a's only")
	}
	if swap(b, []byte("v0"), "v2") || !swap(b, []byte("v1"), "v2") || swap(a, []byte("v1"), "v2a") {
		t.Fatal("swap from a value: want the one from v1, once")
	}
	if v, ok, _ := a.Get(ctx, "channel", k); !ok || string(v) != "v2" {
		t.Fatalf("after the swaps: %q %v; want v2", v, ok)
	}
	if err := a.Delete(ctx, "channel", k); err != nil {
		t.Fatal(err)
	}
	if swap(b, []byte("v2"), "v3") || !swap(b, nil, "v3") {
		t.Fatal("a deleted record: want it taken for absent")
	}
	// Expired by the record's own expiry, before NATS's whole seconds
	// remove it: absent to a swap from nil.
	past, err := a.Swap(ctx, "channel", []byte("old"), nil, []byte("x"), time.Now().Add(-time.Second))
	if err != nil || !past {
		t.Fatalf("swap in an expired record: %v %v", past, err)
	}
	if ok, err := b.Swap(ctx, "channel", []byte("old"), nil, []byte("y"), exp); !ok || err != nil {
		t.Fatalf("swap from absent over an expired record: %v %v", ok, err)
	}
}

// Four processes' worth of stores swap one record from the same value at
// once, round after round: each round exactly one wins.
func TestStore_SwapHasOneWinnerAcrossConnections(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	var stores []*natskv.Store
	for range 4 {
		stores = append(stores, open(t, srv.URL(), "race"))
	}
	exp := time.Now().Add(time.Hour)
	var old []byte // none, the first round
	for round := range 50 {
		value := binary.LittleEndian.AppendUint64(nil, uint64(round))
		var won atomic.Int32
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() {
				ok, err := s.Swap(ctx, "counter", []byte("n"), old, value, exp)
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		if n := won.Load(); n != 1 {
			t.Fatalf("round %d: %d of %d swaps from one value won", round, n, len(stores))
		}
		old = value
	}
	if v, ok, err := stores[0].Get(context.Background(), "counter", []byte("n")); err != nil || !ok || !bytes.Equal(v, old) {
		t.Fatalf("the record %x (%v %v); want the last round's %x", v, ok, err, old)
	}
}
