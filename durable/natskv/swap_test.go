package natskv_test

import (
	"context"
	"encoding/binary"
	"sync"
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

// Four processes' worth of stores count one record up by read and swap:
// no increment is lost, so each swap from one value had one winner.
func TestStore_SwapRacersAcrossConnectionsLoseNoChange(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	const racers, each = 4, 40
	exp := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	for range racers {
		s := open(t, srv.URL(), "race")
		wg.Go(func() {
			for range each {
				for {
					old, ok, err := s.Get(ctx, "counter", []byte("n"))
					if err != nil {
						t.Error(err)
						return
					}
					var n uint64
					if ok {
						n = binary.LittleEndian.Uint64(old)
					} else {
						old = nil
					}
					swapped, err := s.Swap(ctx, "counter", []byte("n"), old, binary.LittleEndian.AppendUint64(nil, n+1), exp)
					if err != nil {
						t.Error(err)
						return
					}
					if swapped {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	v, ok, err := open(t, srv.URL(), "race").Get(context.Background(), "counter", []byte("n"))
	if err != nil || !ok || binary.LittleEndian.Uint64(v) != racers*each {
		t.Fatalf("counter %x (%v %v) after %d increments", v, ok, err, racers*each)
	}
}
