package quotation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/quotation"
)

const (
	alice = "did:nostr:" + "aa" + "00000000000000000000000000000000000000000000000000000000000000"
	bob   = "did:key:z6MkbobbobbobbobbobbobbobbobbobbobbobbobbobbobbobbobB"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rig is a desk that sells "translate" at 10 sats over a simulated
// Lightning network, with the paying client's wallet.
type rig struct {
	t      testing.TB
	net    *lnsim.Network
	desk   *quotation.Desk
	store  durable.Store
	client *lnsim.Wallet
	clock  *clock
}

func newRig(t testing.TB, store durable.Store) *rig {
	t.Helper()
	clk := &clock{now: time.Now()}
	n, err := lnsim.Open(lnsim.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	n.AddWallet("client", 1_000_000)
	n.AddWallet("server", 0)
	sw, _ := n.Wallet("server")
	cw, _ := n.Wallet("client")
	if store == nil {
		store = durable.NewMemory(durable.Options{Now: clk.Now})
	}
	r := &rig{t: t, net: n, store: store, client: cw, clock: clk}
	r.desk = r.newDesk(sw)
	return r
}

func (r *rig) newDesk(w payments.Wallet) *quotation.Desk {
	d, err := quotation.New(quotation.Options{
		Store:     r.store,
		Processor: lightning.NewProcessor(w, lightning.ProcessorOptions{PollMin: time.Millisecond, Now: r.clock.Now}),
		Prices:    map[string]payments.Cap{"translate": {Capability: "tool:translate", Low: 10, High: 10, Unit: "sats"}},
		TTL:       time.Minute,
		Now:       r.clock.Now,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

var args = json.RawMessage(`{"text":"hello","to":"fr"}`)

func (r *rig) quote(caller string, a json.RawMessage) quotation.Quote {
	r.t.Helper()
	q, err := r.desk.Quote(context.Background(), caller, "translate", a)
	if err != nil {
		r.t.Fatal(err)
	}
	return q
}

// pay pays a quotation from the client's wallet and returns the preimage.
func (r *rig) pay(q quotation.Quote) string {
	r.t.Helper()
	pre, err := r.client.PayInvoice(context.Background(), q.Instructions.PayReq)
	if err != nil {
		r.t.Fatal(err)
	}
	return pre
}

func wantErr(t *testing.T, err, want error, code int64) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	if got := quotation.Code(err); got != code {
		t.Fatalf("code %d, want %d", got, code)
	}
}

func TestQuote_PaidCallThroughQuotationPaymentConfirmation(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	q := r.quote(alice, args)
	if q.Price.Amount != 10 || q.Price.Unit != "sats" || q.Instructions.PMI != payments.PMILightningBolt11 || !strings.HasPrefix(q.Instructions.PayReq, "ln") {
		t.Fatalf("quote = %+v", q)
	}
	if q.ExpiresAt != r.clock.Now().Add(time.Minute).Unix() {
		t.Fatalf("expires_at = %d", q.ExpiresAt)
	}
	// Not paid yet: the call is refused.
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", args), quotation.ErrNotPaid, quotation.CodeQuotationNotPaid)
	pre := r.pay(q)
	if err := r.desk.Confirm(ctx, alice, q.ID, pre); err != nil {
		t.Fatal(err)
	}
	// Canonical arguments: key order and spacing do not matter.
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", json.RawMessage(`{ "to":"fr", "text":"hello" }`)); err != nil {
		t.Fatal(err)
	}
	if b, _ := r.net.Balance("server"); b != 10_000 {
		t.Fatalf("server balance %d msat, want 10000", b)
	}
}

func TestQuote_ExpiredQuotation(t *testing.T) {
	r := newRig(t, nil)
	q := r.quote(alice, args)
	r.clock.Add(time.Minute + time.Second)
	wantErr(t, r.desk.Confirm(context.Background(), alice, q.ID, strings.Repeat("00", 32)), quotation.ErrExpired, quotation.CodeQuotationExpired)
	wantErr(t, r.desk.Spend(context.Background(), alice, q.ID, "translate", args), quotation.ErrExpired, quotation.CodeQuotationExpired)
}

func TestQuote_ReusedQuotation(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	q := r.quote(alice, args)
	if err := r.desk.Confirm(ctx, alice, q.ID, r.pay(q)); err != nil {
		t.Fatal(err)
	}
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", args); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", args), quotation.ErrSpent, quotation.CodeQuotationSpent)
}

func TestQuote_SomeoneElsesQuotation(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	q := r.quote(alice, args)
	pre := r.pay(q)
	wantErr(t, r.desk.Confirm(ctx, bob, q.ID, pre), quotation.ErrNotYours, quotation.CodeQuotationNotYours)
	if err := r.desk.Confirm(ctx, alice, q.ID, pre); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.desk.Spend(ctx, bob, q.ID, "translate", args), quotation.ErrNotYours, quotation.CodeQuotationNotYours)
	// Alice's quotation is still good.
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", args); err != nil {
		t.Fatal(err)
	}
}

func TestQuote_QuotationForOtherArguments(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	q := r.quote(alice, args)
	if err := r.desk.Confirm(ctx, alice, q.ID, r.pay(q)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", json.RawMessage(`{"text":"a whole book","to":"fr"}`)), quotation.ErrMismatch, quotation.CodeQuotationMismatch)
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "summarize", args), quotation.ErrMismatch, quotation.CodeQuotationMismatch)
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", args); err != nil {
		t.Fatalf("the mismatches must not spend the quotation: %v", err)
	}
}

func TestQuote_FailedPaymentVerification(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	q := r.quote(alice, args)
	// Not a preimage, a preimage of something else, and (unpaid) the
	// right length but wrong: each refused, the call never allowed.
	for _, proof := range []string{"", "not hex", strings.Repeat("11", 32)} {
		wantErr(t, r.desk.Confirm(ctx, alice, q.ID, proof), quotation.ErrBadProof, quotation.CodePaymentProofInvalid)
	}
	other := r.quote(alice, json.RawMessage(`{"text":"other"}`))
	wantErr(t, r.desk.Confirm(ctx, alice, q.ID, r.pay(other)), quotation.ErrBadProof, quotation.CodePaymentProofInvalid)
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", args), quotation.ErrNotPaid, quotation.CodeQuotationNotPaid)
}

func TestQuote_UnknownAndAnonymous(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	wantErr(t, r.desk.Spend(ctx, alice, "nope", "translate", args), quotation.ErrUnknown, quotation.CodeQuotationUnknown)
	_, err := r.desk.Quote(ctx, "", "translate", args)
	wantErr(t, err, quotation.ErrAnonymous, quotation.CodeQuotationAnonymous)
	_, err = r.desk.Quote(ctx, alice, "free_tool", args)
	wantErr(t, err, quotation.ErrNotPriced, -32602)
	_, err = r.desk.Quote(ctx, alice, "translate", json.RawMessage(`{"text":`))
	wantErr(t, err, quotation.ErrInvalidInput, -32602)
}

// A paid quotation survives a restart of the server, and is spent at most
// once across it.
// openStore opens the durable store in dir, closed after the test.
func openStore(t *testing.T, dir string) durable.Store {
	t.Helper()
	store, err := durable.Open(dir, "q", durable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// restart closes the rig's store and starts its desk again on the store
// reopened from dir.
func (r *rig) restart(t *testing.T, dir string) {
	t.Helper()
	r.store.Close()
	r.store = openStore(t, dir)
	sw, _ := r.net.Wallet("server")
	r.desk = r.newDesk(sw)
}

func TestQuote_SurvivesRestartSpentOnce(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, openStore(t, dir))
	ctx := context.Background()
	q := r.quote(alice, args)
	if err := r.desk.Confirm(ctx, alice, q.ID, r.pay(q)); err != nil {
		t.Fatal(err)
	}
	r.restart(t, dir)
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", args); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	r.restart(t, dir)
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", args), quotation.ErrSpent, quotation.CodeQuotationSpent)
}

// Two calls racing to spend one quotation: exactly one wins.
func TestQuote_ConcurrentSpendOnce(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	q := r.quote(alice, args)
	if err := r.desk.Confirm(ctx, alice, q.ID, r.pay(q)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Go(func() {
			if r.desk.Spend(ctx, alice, q.ID, "translate", args) == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d spends succeeded, want 1", won)
	}
}

// A quotation released after its call was refused before MCP pays for
// the same call once more, across a restart, and only once.
func TestQuote_ReleasedQuotationPaysOnce(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, openStore(t, dir))
	ctx := context.Background()
	q := r.quote(alice, args)
	wantErr(t, r.desk.Release(ctx, alice, q.ID), quotation.ErrNotPaid, quotation.CodeQuotationNotPaid)
	if err := r.desk.Confirm(ctx, alice, q.ID, r.pay(q)); err != nil {
		t.Fatal(err)
	}
	if err := r.desk.Release(ctx, alice, q.ID); err == nil {
		t.Fatal("released a quotation no call had spent")
	}
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", args); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.desk.Release(ctx, bob, q.ID), quotation.ErrNotYours, quotation.CodeQuotationNotYours)
	if err := r.desk.Release(ctx, alice, q.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.desk.Release(ctx, alice, q.ID); err == nil {
		t.Fatal("released one spend twice")
	}
	r.restart(t, dir)
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", json.RawMessage(`{"text":"other"}`)), quotation.ErrMismatch, quotation.CodeQuotationMismatch)
	if err := r.desk.Spend(ctx, alice, q.ID, "translate", args); err != nil {
		t.Fatalf("a released quotation after a restart: %v", err)
	}
	wantErr(t, r.desk.Spend(ctx, alice, q.ID, "translate", args), quotation.ErrSpent, quotation.CodeQuotationSpent)
	if b, _ := r.net.Balance("server"); b != 10_000 {
		t.Fatalf("server balance %d msat, want 10000", b)
	}
}

func FuzzArgsHash(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,2,{"c":"d"}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"x":1e400}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := quotation.ArgsHash(b)
		if err == nil && len(h) != 64 {
			t.Fatalf("hash %q", h)
		}
	})
}
