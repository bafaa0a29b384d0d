package channel

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable"
)

// Books of two processes of a replica group, sharing one store: each
// process has its own Books (its own locks), as the replicas of cvm
// gateway --nats do on the group's bucket. A durable.Memory stands for the
// bucket here; gateway's TestChannelHTTP_ReplicasRacingReceipts runs on
// NATS.

// yieldingSwapper is yieldingStore for a store that compares and swaps:
// it yields between the read of a record and the write that follows.
type yieldingSwapper struct{ durable.Swapper }

func (s yieldingSwapper) Get(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	v, ok, err := s.Swapper.Get(ctx, space, key)
	runtime.Gosched()
	return v, ok, err
}

// replicas returns the books of n processes on one shared store, the
// first f's.
func (f *fixture) replicas(t *testing.T, n int) []*Books {
	t.Helper()
	books := []*Books{f.books}
	for len(books) < n {
		books = append(books, f.reopen(t, f.books.opts.Store))
	}
	return books
}

// Two calls on one channel race on two replicas, each with a receipt made
// from the same last state: one is accepted, the other is told to resend
// with the state it lost to, and is accepted when it does. Every call runs
// paid: the channel is debited the sum of the prices, never less (an
// unpaid run) or more (a double debit).
func TestBooks_ReplicasRacingReceiptsDebitEachCallOnce(t *testing.T) {
	f := newFixture(t, yieldingSwapper{durable.NewMemory(durable.Options{})})
	books := f.replicas(t, 2)
	s := f.open(t, 1_000_000)
	prices := [2]uint64{10, 7}
	var total uint64
	resent := 0
	for round := range 200 {
		var wg sync.WaitGroup
		var errs [2]error
		for i, b := range books {
			wg.Go(func() {
				r, _ := s.Next(prices[i])
				_, errs[i] = b.Accept(t.Context(), clientKey, &r, prices[i], "call")
			})
		}
		wg.Wait()
		for i, err := range errs {
			total += prices[i]
			if err == nil {
				continue
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeConflict || e.State == nil {
				t.Fatalf("round %d: the call on replica %d got %v; want a conflict with the state to resend from", round, i, err)
			}
			r, err := e.State.Next(prices[i])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := books[i].Accept(t.Context(), clientKey, &r, prices[i], "call resent"); err != nil {
				t.Fatalf("round %d: the resent call on replica %d: %v", round, i, err)
			}
			resent++
		}
		var err error
		if s, err = books[round%2].Get(t.Context(), clientKey, s.Channel); err != nil {
			t.Fatal(err)
		}
		if s.Accumulated != total || s.Nonce != uint64(2*(round+1)) {
			t.Fatalf("round %d: %d msat in %d receipts for calls of %d msat in %d", round, s.Accumulated, s.Nonce, total, 2*(round+1))
		}
	}
	if resent == 0 {
		t.Fatal("no call ever lost a race: the test raced nothing")
	}
}

// A top-up on one replica races receipts on another: no deposit is lost,
// no receipt is lost, and the top-up is applied once however often it is
// sent.
func TestBooks_ReplicasTopUpRacingReceiptsLosesNothing(t *testing.T) {
	f := newFixture(t, yieldingSwapper{durable.NewMemory(durable.Options{})})
	books := f.replicas(t, 2)
	s := f.open(t, 1_000)
	const topUps = 100
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range topUps {
			for range 2 { // each payment sent twice, as a retry would
				if _, err := books[0].TopUp(t.Context(), s.Channel, funding(byte(2+i), 100)); err != nil {
					t.Errorf("top-up %d: %v", i, err)
					return
				}
			}
		}
	})
	var paid atomic.Uint64
	wg.Go(func() {
		st := s
		for range 400 {
			r, err := st.Next(5)
			if err != nil {
				return // the deposit is spent; the top-ups are still coming
			}
			if st, err = books[1].Accept(t.Context(), clientKey, &r, 5, "call"); err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Code != CodeConflict {
					t.Errorf("a receipt: %v", err)
					return
				}
				st = *e.State
				continue
			}
			paid.Add(5)
		}
	})
	wg.Wait()
	got, err := books[1].Get(t.Context(), clientKey, s.Channel)
	if err != nil {
		t.Fatal(err)
	}
	if got.Deposit != 1_000+topUps*100 || got.Accumulated != paid.Load() {
		t.Fatalf("books %+v; want a deposit of %d and %d msat spent", got, 1_000+topUps*100, paid.Load())
	}
}

// One payment opens one channel, or tops up one, across replicas: two
// processes applying it to different channels at once, one wins.
func TestBooks_ReplicasApplyAFundingPaymentOnce(t *testing.T) {
	f := newFixture(t, yieldingSwapper{durable.NewMemory(durable.Options{})})
	books := f.replicas(t, 2)
	s := f.open(t, 1_000)
	for i := range 50 {
		hash := byte(100 + i)
		other := funding(hash, 500)
		other.Client = []byte("another client")
		var wg sync.WaitGroup
		var errs [2]error
		wg.Go(func() { _, errs[0] = books[0].TopUp(t.Context(), s.Channel, funding(hash, 500)) })
		wg.Go(func() { _, errs[1] = books[1].Open(t.Context(), other) })
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs[:]...), ErrFundingUsed) {
			t.Fatalf("payment %d applied by a top-up (%v) and an open (%v): want one, the other ErrFundingUsed", i, errs[0], errs[1])
		}
	}
}

// A refund is paid by one call at a time across replicas: a call on
// another replica while the first pays is told to ask again, and pays
// nothing.
func TestBooks_ReplicasRefundPaidOnce(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 1000)
	inv := f.rf.invoice(t, f.clock.Now(), 1000, 1)
	block := &firstBlocks{refunder: f.rf, entered: make(chan struct{}), release: make(chan struct{})}
	var books []*Books
	for range 2 {
		b, err := New(Options{Store: f.books.opts.Store, ServerKey: serverKey, Refunder: block, Now: f.clock.Now,
			IdleTTL: time.Hour, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		books = append(books, b)
	}
	done := make(chan error, 1)
	go func() {
		_, err := books[0].Refund(t.Context(), clientKey, s.Channel, inv)
		done <- err
	}()
	<-block.entered
	if _, err := books[1].Refund(t.Context(), clientKey, s.Channel, inv); !errors.Is(err, ErrRefundBusy) {
		t.Fatalf("a refund on another replica while one is paid: %v, want ErrRefundBusy", err)
	}
	close(block.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, err := books[1].Refund(t.Context(), clientKey, s.Channel, inv); err != nil || st.Refund != RefundPaid {
		t.Fatalf("refund again once paid: %+v, %v", st, err)
	}
	if p := f.rf.payments(); len(p) != 1 {
		t.Fatalf("%d payments of the refund", len(p))
	}
}

// firstBlocks holds the first payment until released; the others go
// through.
type firstBlocks struct {
	*refunder
	once             sync.Once
	entered, release chan struct{}
}

func (b *firstBlocks) PayRefund(ctx context.Context, invoice string, msat uint64) (string, error) {
	first := false
	b.once.Do(func() { first = true })
	if first {
		close(b.entered)
		<-b.release
	}
	return b.refunder.PayRefund(ctx, invoice, msat)
}
