package natskv_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable"

	"github.com/cvmgo/cvm/durable/natskv"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
)

func open(t *testing.T, url, bucket string) *natskv.Store {
	t.Helper()
	conn, err := natsx.Connect(t.Context(), url, natsx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	s, err := natskv.Open(t.Context(), conn.JS, bucket, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Four processes' worth of stores race to claim the same keys: each key
// has exactly one winner.
func TestStore_ClaimHasOneWinnerAcrossConnections(t *testing.T) {
	srv := natstest.Start(t)
	var stores []*natskv.Store
	for range 4 {
		stores = append(stores, open(t, srv.URL(), "claims"))
	}
	const keys = 200
	var wins [keys]atomic.Int32
	var wg sync.WaitGroup
	exp := time.Now().Add(time.Minute)
	for _, s := range stores {
		wg.Go(func() {
			for i := range keys {
				ok, err := s.Claim(context.Background(), "contextvm.executed", fmt.Appendf(nil, "k%d", i), exp)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					wins[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if n := wins[i].Load(); n != 1 {
			t.Fatalf("key %d claimed %d times", i, n)
		}
	}
}

func TestStore_PutGetExpiryDelete(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), "state")
	ctx := t.Context()
	if err := s.Put(ctx, "sp", []byte{1, 2}, []byte("v1"), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(ctx, "sp", []byte{1, 2}); err != nil || !ok || string(v) != "v1" {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.Get(ctx, "other", []byte{1, 2}); ok {
		t.Fatal("spaces are not separate")
	}
	keys, err := s.Keys(ctx, "sp")
	if err != nil || len(keys) != 1 || string(keys[0]) != "\x01\x02" {
		t.Fatalf("keys: %q %v", keys, err)
	}
	if err := s.Delete(ctx, "sp", []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, "sp", []byte{1, 2}); ok {
		t.Fatal("deleted key still there")
	}
	// A record expires at its expiry, to the nanosecond for readers, and a
	// claim of an expired key succeeds again.
	// The expiry leaves the second claim, on a loaded machine too, time
	// to come before it.
	exp := time.Now().Add(testwait.Timeout(time.Second))
	if ok, err := s.Claim(ctx, "c", []byte("x"), exp); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, _ := s.Claim(ctx, "c", []byte("x"), exp); ok {
		t.Fatal("claimed twice")
	}
	// Pacing that is the behaviour under test: just past the expiry, the
	// record is gone.
	time.Sleep(time.Until(exp) + 10*time.Millisecond)
	if _, ok, _ := s.Get(ctx, "c", []byte("x")); ok {
		t.Fatal("expired record still read")
	}
	if ok, err := s.Claim(ctx, "c", []byte("x"), time.Now().Add(time.Minute)); !ok || err != nil {
		t.Fatalf("claim after expiry: %v %v", ok, err)
	}
}

// Records, claimed or swapped, survive a restart of the NATS server, and a store that lost NATS
// fails rather than claiming.
func TestStore_SurvivesNATSRestart(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), "restart")
	ctx := t.Context()
	if ok, err := s.Claim(ctx, "c", []byte("x"), time.Now().Add(time.Minute)); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := s.Swap(ctx, "sw", []byte("x"), nil, []byte("swapped"), time.Now().Add(time.Minute)); !ok || err != nil {
		t.Fatalf("swap: %v %v", ok, err)
	}
	srv.Stop()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	if ok, err := s.Claim(cctx, "c", []byte("y"), time.Now().Add(time.Minute)); ok || err == nil {
		t.Fatalf("claim without NATS: %v %v", ok, err)
	}
	cancel()
	srv.Restart()
	var ok bool
	var err error
	if !testwait.Until(ctx, 10*time.Second, func() bool {
		ok, err = s.Claim(ctx, "c", []byte("x"), time.Now().Add(time.Minute))
		return err == nil
	}) {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("claim lost in the restart")
	}
	if v, ok, err := s.Get(ctx, "sw", []byte("x")); !ok || err != nil || string(v) != "swapped" {
		t.Fatalf("swap lost in the restart: %q %v %v", v, ok, err)
	}
}

// A lease has one holder at a time; it renews for its holder and passes to
// another once it expires.
func TestStore_LeaseOneHolderRenewedThenPassed(t *testing.T) {
	srv := natstest.Start(t)
	a, b := open(t, srv.URL(), "lease"), open(t, srv.URL(), "lease")
	ctx := t.Context()
	// The lease's term leaves a renewal every quarter of it a margin
	// of three quarters for the NATS round trips, on a loaded machine too.
	term := testwait.Timeout(2 * time.Second)
	lease := func(s *natskv.Store, who string) bool {
		held, err := s.Lease(ctx, "leader", []byte("k"), []byte(who), term)
		if err != nil {
			t.Logf("lease %s: %v", who, err)
		}
		return held
	}
	if !lease(a, "a") || lease(b, "b") {
		t.Fatal("first lease")
	}
	for range 3 {
		// Pacing that is the behaviour under test: renewed within its
		// term, the lease stays a's.
		time.Sleep(term / 4)
		if !lease(a, "a") || lease(b, "b") {
			t.Fatal("renewal")
		}
	}
	testwait.Eventually(t, 5*term, "the lease to pass to b", func() bool { return lease(b, "b") })
	if lease(a, "a") {
		t.Fatal("a holds it again while b does")
	}
}

// BenchmarkStore measures, one caller at a time, the shared-store calls a
// replica makes per request (claim, put, delete) against an embedded
// JetStream with NATS's default fsync interval, and a durable.Memory claim
// as the baseline of one process without NATS.
func BenchmarkStore(b *testing.B) {
	srv := natstest.StartDefaultSync(b)
	conn, err := natsx.Connect(context.Background(), srv.URL(), natsx.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	s, err := natskv.Open(context.Background(), conn.JS, "bench", natskv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	b.Run("memory-claim", func(b *testing.B) {
		m := durable.NewMemory(durable.Options{})
		i := 0
		for b.Loop() {
			i++
			m.Claim(ctx, "c", fmt.Appendf(nil, "%d", i), exp)
		}
	})
	b.Run("claim", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if ok, err := s.Claim(ctx, "c", fmt.Appendf(nil, "%d", i), exp); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("put", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := s.Put(ctx, "p", fmt.Appendf(nil, "%d", i), []byte("v"), exp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("delete", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := s.Delete(ctx, "p", fmt.Appendf(nil, "%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
