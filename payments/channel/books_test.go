package channel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/bolt11"
)

var (
	serverKey = []byte("server-key-32-bytes-long-xxxxxxx")
	clientKey = []byte("client-key-32-bytes-long-xxxxxxx")
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// refunder pays refunds in the test: it records every invoice it pays, and
// fails while err is set.
type refunder struct {
	mu        sync.Mutex
	paid      []string
	preimages map[string]string
	err       error
}

func (r *refunder) PayRefund(_ context.Context, invoice string, amountMsat uint64) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return "", r.err
	}
	r.paid = append(r.paid, invoice)
	return r.preimages[invoice], nil
}

func (r *refunder) payments() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paid...)
}

// invoice makes a BOLT11 invoice of msat, as the client's wallet would,
// and tells rf its preimage.
func (r *refunder) invoice(t *testing.T, now time.Time, msat uint64, n byte) string {
	t.Helper()
	preimage := []byte{n, 42}
	key, _ := btcec.NewPrivateKey()
	inv, err := bolt11.Encode(bolt11.Invoice{
		Currency: bolt11.Regtest, Amount: int64(msat), Timestamp: now, Hash: sha256.Sum256(preimage),
		Description: "refund",
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.preimages == nil {
		r.preimages = map[string]string{}
	}
	r.preimages[inv] = hex.EncodeToString(preimage)
	return inv
}

type fixture struct {
	books *Books
	clock *clock
	rf    *refunder
}

func newFixture(t *testing.T, store durable.Store) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{t: time.Unix(1_800_000_000, 0)}, rf: &refunder{}}
	f.books = f.reopen(t, store)
	return f
}

func (f *fixture) reopen(t *testing.T, store durable.Store) *Books {
	t.Helper()
	b, err := New(Options{Store: store, ServerKey: serverKey, Refunder: f.rf, Now: f.clock.Now, IdleTTL: time.Hour,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openFile opens the file store in dir, as a restarted server does.
func openFile(t *testing.T, dir string) *durable.File {
	t.Helper()
	store, err := durable.Open(dir, "state", durable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func funding(n byte, msat uint64) Funding {
	return Funding{PaymentHash: [32]byte{n}, AmountMsat: msat, Client: clientKey, Fragment: FragmentNostr}
}

func (f *fixture) open(t *testing.T, msat uint64) State {
	t.Helper()
	s, err := f.books.Open(t.Context(), funding(1, msat))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pay accepts the next receipt for price and returns the state.
func (f *fixture) pay(t *testing.T, s State, price uint64) State {
	t.Helper()
	r, err := s.Next(price)
	if err != nil {
		t.Fatal(err)
	}
	s, err = f.books.Accept(t.Context(), clientKey, &r, price, "call")
	if err != nil {
		t.Fatalf("Accept(%+v): %v", r, err)
	}
	return s
}

func TestBooks_OpenIsIdempotent(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 10_000)
	f.pay(t, s, 100)
	again := f.open(t, 10_000)
	if again.Nonce != 1 || again.Accumulated != 100 || again.Deposit != 10_000 {
		t.Fatalf("opening again gave %+v", again)
	}
	// The same payment cannot fund another client's channel.
	other := funding(1, 10_000)
	other.Client = []byte("another client")
	if _, err := f.books.Open(t.Context(), other); !errors.Is(err, ErrFundingUsed) {
		t.Fatalf("funding reused by another client: %v", err)
	}
}

func TestBooks_AcceptRefusesAllButTheNextReceipt(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 1000)
	s = f.pay(t, s, 100) // nonce 1, 100 spent
	next, _ := s.Next(100)
	edit := func(change func(r *SubRAV)) *SubRAV { r := next; change(&r); return &r }
	for _, c := range []struct {
		name   string
		r      *SubRAV
		price  uint64
		client []byte
		want   error
	}{
		{"nonce skipped", edit(func(r *SubRAV) { r.Nonce = 3 }), 100, clientKey, ErrConflict},
		{"nonce old", edit(func(r *SubRAV) { r.Nonce = 1; r.AccumulatedAmount = 150 }), 100, clientKey, ErrConflict},
		{"sent again", edit(func(r *SubRAV) { r.Nonce = 1; r.AccumulatedAmount = 100 }), 100, clientKey, ErrDuplicate},
		{"amount short", edit(func(r *SubRAV) { r.AccumulatedAmount = 199 }), 100, clientKey, ErrConflict},
		{"amount over", edit(func(r *SubRAV) { r.AccumulatedAmount = 201 }), 100, clientKey, ErrConflict},
		{"beyond deposit", edit(func(r *SubRAV) { r.AccumulatedAmount = 1001 }), 901, clientKey, ErrInsufficientFunds},
		{"epoch", edit(func(r *SubRAV) { r.ChannelEpoch = 1 }), 100, clientKey, ErrEpochMismatch},
		{"fragment", edit(func(r *SubRAV) { r.VMIDFragment = "key-1" }), 100, clientKey, ErrTampered},
		{"chain", edit(func(r *SubRAV) { r.ChainID = 4 }), 100, clientKey, ErrTampered},
		{"channel", edit(func(r *SubRAV) { r.ChannelID[0]++ }), 100, clientKey, ErrNotFound},
		{"another client", edit(func(*SubRAV) {}), 100, []byte("another client"), ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.books.Accept(t.Context(), c.client, c.r, c.price, "call")
			if !errors.Is(err, c.want) {
				t.Fatalf("Accept = %v, want %v", err, c.want)
			}
			var e *Error
			if errors.As(err, &e) && c.want != ErrNotFound {
				if e.State == nil || e.State.Nonce != 1 || e.State.Accumulated != 100 || e.State.Deposit != 1000 {
					t.Fatalf("refusal carries state %+v, want nonce 1, 100 of 1000", e.State)
				}
			}
			got, err := f.books.Get(t.Context(), clientKey, s.Channel)
			if err != nil || got.Nonce != 1 || got.Accumulated != 100 {
				t.Fatalf("after a refusal the channel is %+v, %v: something was debited", got, err)
			}
		})
	}
	// Exactly the deposit is accepted.
	s = f.pay(t, s, 900)
	if s.Accumulated != 1000 || s.Nonce != 2 {
		t.Fatalf("state %+v", s)
	}
}

func TestBooks_TopUpOncePerPayment(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 100)
	for range 2 {
		var err error
		if s, err = f.books.TopUp(t.Context(), s.Channel, funding(2, 50)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Deposit != 150 {
		t.Fatalf("deposit after one top-up sent twice = %d, want 150", s.Deposit)
	}
	if _, err := f.books.TopUp(t.Context(), s.Channel, funding(1, 100)); err != nil {
		t.Fatal(err) // the opening payment again: applied already
	}
	if s, _ = f.books.Get(t.Context(), clientKey, s.Channel); s.Deposit != 150 {
		t.Fatalf("the opening payment as a top-up changed the deposit to %d", s.Deposit)
	}
	f.pay(t, s, 150)
}

// A receipt is applied at most once across a restart: the books made again
// on the store reopened from disk refuse it, and accept the next.
func TestBooks_ReceiptsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	store := openFile(t, dir)
	f := newFixture(t, store)
	s := f.open(t, 1000)
	r, _ := s.Next(300)
	if _, err := f.books.Accept(t.Context(), clientKey, &r, 300, "call"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.books.TopUp(t.Context(), s.Channel, funding(2, 500)); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store = openFile(t, dir)
	defer store.Close()
	books := f.reopen(t, store)
	_, err := books.Accept(t.Context(), clientKey, &r, 300, "call again")
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDuplicate || e.State.Ref != "call" {
		t.Fatalf("the receipt again after a restart: %v, want ErrDuplicate naming the call it paid", err)
	}
	s, err = books.TopUp(t.Context(), s.Channel, funding(2, 500))
	if err != nil || s.Deposit != 1500 || s.Accumulated != 300 || s.Nonce != 1 {
		t.Fatalf("after a restart: %+v, %v", s, err)
	}
	r, _ = s.Next(1200)
	if _, err := books.Accept(t.Context(), clientKey, &r, 1200, "call"); err != nil {
		t.Fatal(err)
	}
}

// yieldingStore yields the processor between reading a record and writing
// one, where a read-check-write without the channel's lock would let two
// receipts both see the same last state.
type yieldingStore struct{ durable.Store }

func (s yieldingStore) Get(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	v, ok, err := s.Store.Get(ctx, space, key)
	runtime.Gosched()
	return v, ok, err
}

// Receipts at once on one channel: one wins, the others are told the
// state; the channel is debited once.
func TestBooks_ConcurrentReceiptsDebitOnce(t *testing.T) {
	f := newFixture(t, yieldingStore{durable.NewMemory(durable.Options{})})
	s := f.open(t, 100_000)
	for round := range 200 {
		r, _ := s.Next(10)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, errs[i] = f.books.Accept(t.Context(), clientKey, &r, 10, "call") })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrDuplicate):
				t.Fatalf("round %d: a loser got %v, want ErrDuplicate with the state", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d of %d accepted", round, won, len(errs))
		}
		s, _ = f.books.Get(t.Context(), clientKey, s.Channel)
		if s.Accumulated != uint64(10*(round+1)) {
			t.Fatalf("round %d: %d msat spent", round, s.Accumulated)
		}
	}
}

func TestBooks_RefundPaidOnce(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 1000)
	s = f.pay(t, s, 300)
	r, _ := s.Next(100)
	if s, _ = f.books.Close(t.Context(), clientKey, s.Channel); !s.Closed || s.Owed != 700 {
		t.Fatalf("closed: %+v", s)
	}
	if _, err := f.books.Accept(t.Context(), clientKey, &r, 100, "call"); !errors.Is(err, ErrClosed) {
		t.Fatalf("a receipt after close: %v", err)
	}
	if _, err := f.books.Refund(t.Context(), clientKey, s.Channel, f.rf.invoice(t, f.clock.Now(), 1000, 1)); err == nil {
		t.Fatal("an invoice for more than is owed was accepted")
	}
	inv := f.rf.invoice(t, f.clock.Now(), 700, 2)
	for range 2 {
		s, err := f.books.Refund(t.Context(), clientKey, s.Channel, inv)
		if err != nil || s.Refund != RefundPaid {
			t.Fatalf("Refund: %+v, %v", s, err)
		}
	}
	if p := f.rf.payments(); len(p) != 1 || p[0] != inv {
		t.Fatalf("refund payments: %d", len(p))
	}
}

// A refund whose payment did not finish is paid again after a restart, to
// the invoice recorded before the crash, whatever invoice comes now; a
// payment known not to have happened frees the client to send another.
func TestBooks_RefundAfterACrashPaysTheRecordedInvoice(t *testing.T) {
	dir := t.TempDir()
	store := openFile(t, dir)
	f := newFixture(t, store)
	s := f.open(t, 1000)

	f.rf.err = fmt.Errorf("%w: no route", ErrNotPaid)
	first := f.rf.invoice(t, f.clock.Now(), 1000, 1)
	if _, err := f.books.Refund(t.Context(), clientKey, s.Channel, first); !errors.Is(err, ErrNotPaid) {
		t.Fatalf("Refund: %v", err)
	}
	f.rf.err = errors.New("connection lost") // did it pay? unknown
	second := f.rf.invoice(t, f.clock.Now(), 1000, 2)
	if st, err := f.books.Refund(t.Context(), clientKey, s.Channel, second); err == nil || st.Refund != RefundPending {
		t.Fatalf("Refund: %+v, %v", st, err)
	}
	store.Close()

	store = openFile(t, dir)
	defer store.Close()
	books := f.reopen(t, store)
	f.rf.err = nil
	third := f.rf.invoice(t, f.clock.Now(), 1000, 3)
	if st, err := books.Refund(t.Context(), clientKey, s.Channel, third); err != nil || st.Refund != RefundPaid {
		t.Fatalf("Refund after restart: %+v, %v", st, err)
	}
	if p := f.rf.payments(); len(p) != 1 || p[0] != second {
		t.Fatalf("paid %d invoices; want the one recorded before the crash", len(p))
	}
}

// A channel idle past the TTL closes: receipts are refused with what is
// owed, and the refund waits for the client's invoice.
func TestBooks_IdleChannelClosesAndOwesTheRest(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 1000)
	s = f.pay(t, s, 400)
	f.clock.Add(59 * time.Minute)
	s = f.pay(t, s, 100) // still open: the TTL counts from the last use
	f.clock.Add(time.Hour)
	r, _ := s.Next(100)
	_, err := f.books.Accept(t.Context(), clientKey, &r, 100, "call")
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeClosed || e.State.Owed != 500 {
		t.Fatalf("a receipt on an idle channel: %v", err)
	}
	st, err := f.books.Refund(t.Context(), clientKey, s.Channel, f.rf.invoice(t, f.clock.Now(), 500, 1))
	if err != nil || st.Refund != RefundPaid {
		t.Fatalf("Refund: %+v, %v", st, err)
	}
}

// A refund is paid by one call at a time: another that comes while the
// wallet pays is told to ask again, and pays nothing.
func TestBooks_RefundWhilePayingIsRefused(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 1000)
	inv := f.rf.invoice(t, f.clock.Now(), 1000, 1)
	block := &blockingRefunder{refunder: f.rf, entered: make(chan struct{}), release: make(chan struct{})}
	books, err := New(Options{Store: f.books.opts.Store, ServerKey: serverKey, Refunder: block, Now: f.clock.Now,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := books.Refund(t.Context(), clientKey, s.Channel, inv)
		done <- err
	}()
	<-block.entered
	if _, err := books.Refund(t.Context(), clientKey, s.Channel, inv); !errors.Is(err, ErrRefundBusy) {
		t.Fatalf("a refund while one is paid: %v, want ErrRefundBusy", err)
	}
	close(block.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := f.rf.payments(); len(p) != 1 {
		t.Fatalf("%d payments", len(p))
	}
	// Paid: asking again (another invoice) pays nothing more.
	if st, err := books.Refund(t.Context(), clientKey, s.Channel, f.rf.invoice(t, f.clock.Now(), 1000, 2)); err != nil || st.Refund != RefundPaid {
		t.Fatalf("Refund again: %+v, %v", st, err)
	}
	if p := f.rf.payments(); len(p) != 1 {
		t.Fatalf("%d payments", len(p))
	}
}

// blockingRefunder holds a payment until released.
type blockingRefunder struct {
	*refunder
	entered, release chan struct{}
}

func (b *blockingRefunder) PayRefund(ctx context.Context, invoice string, msat uint64) (string, error) {
	close(b.entered)
	<-b.release
	return b.refunder.PayRefund(ctx, invoice, msat)
}

// A wallet whose preimage is not the invoice's has not proven a payment:
// the refund stays pending on that invoice.
func TestBooks_RefundWithAWrongPreimageStaysPending(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	s := f.open(t, 1000)
	inv := f.rf.invoice(t, f.clock.Now(), 1000, 1)
	f.rf.preimages[inv] = "00"
	st, err := f.books.Refund(t.Context(), clientKey, s.Channel, inv)
	if err == nil || st.Refund != RefundPending {
		t.Fatalf("Refund: %+v, %v", st, err)
	}
}
