package zap_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/zap"
)

// A payment request is a zap invoice from the address for exactly the
// price, bound to a zap request the server signed (shown in _meta, p the
// address's nostrPubkey, the server's relays), and the payment settles on
// its receipt: exactly the price moves.
func TestProcessor_SettlesOnTheReceiptOfItsInvoice(t *testing.T) {
	f := newFixture(t)
	p := f.processor(t)
	req := f.require(t, p, 10)
	if req.PMI != payments.PMILightningBolt11 || req.Amount != 10 || req.TTL <= 0 || !strings.HasPrefix(req.PayReq, "lnbcrt100n1") {
		t.Fatalf("payment request %+v", req)
	}
	zr, err := zap.ParseRequest(zapRequestOf(t, req))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Event.PubKey != f.key.Public() || zr.AmountMsat != 10_000 || zr.Recipient != f.zapper.Public() ||
		len(zr.Relays) != 1 || zr.Relays[0] != f.relayURL {
		t.Errorf("zap request %+v", zr)
	}
	inv, err := bolt11.Decode(req.PayReq)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := zap.CheckMeta(req, inv); !ok || err != nil {
		t.Errorf("the client's check of the zap request: %v %v", ok, err)
	}
	done := verifying(t, p, req)
	if _, err := f.net.Pay("alice", req.PayReq); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("no settlement; log:\n%s", f.log)
	}
	if a, s := f.balance(t, "alice"), f.balance(t, "srv"); a != 90_000 || s != 10_000 {
		t.Errorf("balances alice %d srv %d msat; want 90000 and 10000", a, s)
	}
}

// Receipts signed by the address's key that are for another invoice, for
// a smaller amount, or carry another zap request, and a real receipt of
// an earlier payment replayed, settle nothing: Verify waits on until the
// payment itself is made.
func TestProcessor_ReceiptsThatSettleNothing(t *testing.T) {
	f := newFixture(t)
	p := f.processor(t)
	const skipped = "a receipt that settles nothing"

	// An earlier payment, settled: its receipt is replayed below.
	first := f.require(t, p, 10)
	done := verifying(t, p, first)
	if _, err := f.net.Pay("alice", first.PayReq); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	old := f.receiptOf(t, first.PayReq)

	req := f.require(t, p, 10)
	done = verifying(t, p, req)
	zr, err := zap.ParseRequest(zapRequestOf(t, req))
	if err != nil {
		t.Fatal(err)
	}
	desc := zapRequestOf(t, req)
	otherZR, otherDesc := f.zapRequest(t, 10_000, f.key)
	smallZR, smallDesc := f.zapRequest(t, 5_000, f.key)
	forged := []nostr.Event{
		zap.NewReceipt(zr, desc, f.invoice(t, 10_000, desc), "", nostr.Now()),               // another invoice
		zap.NewReceipt(smallZR, smallDesc, f.invoice(t, 5_000, smallDesc), "", nostr.Now()), // a smaller amount
		zap.NewReceipt(otherZR, otherDesc, req.PayReq, "", nostr.Now()),                     // another zap request
	}
	for _, evt := range forged {
		f.publish(t, evt, f.zapper)
	}
	f.publish(t, old, f.zapper) // replayed: the same event, published again
	if !testwait.Until(t.Context(), 20*time.Second, func() bool { return count(f.log, skipped) >= 4 }) {
		t.Fatalf("the four receipts were not all read and refused; log:\n%s", f.log)
	}
	select {
	case err := <-done:
		t.Fatalf("settled by a receipt that is not its own: %v; log:\n%s", err, f.log)
	default:
	}
	if _, err := f.net.Pay("alice", req.PayReq); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := f.balance(t, "srv"); s != 20_000 {
		t.Errorf("srv holds %d msat; want 20000", s)
	}
}

// receiptOf is the receipt of invoice pr on the fixture's relay.
func (f *fixture) receiptOf(t *testing.T, pr string) nostr.Event {
	t.Helper()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{f.relayURL}})
	defer pool.Close()
	var found nostr.Event
	testwait.Eventually(t, 20*time.Second, "the receipt on the relay", func() bool {
		ctx, cancel := testwait.Context(t, 5*time.Second)
		defer cancel()
		evts, _ := pool.Query(ctx, nostr.Filter{Kinds: []nostr.Kind{zap.KindReceipt}, Authors: []nostr.PubKey{f.zapper.Public()}})
		for _, e := range evts {
			if e.Tags.FindWithValue("bolt11", pr) != nil {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// A zap asked for before a restart is kept in the store: the receipt
// published while no processor ran is read by the next one, which
// subscribes from the zap request's time.
func TestProcessor_ReadsAReceiptPublishedWhileItWasDown(t *testing.T) {
	f := newFixture(t)
	p := f.processor(t)
	req := f.require(t, p, 7)
	p.Close()
	if _, err := f.net.Pay("alice", req.PayReq); err != nil {
		t.Fatal(err)
	}
	f.receiptOf(t, req.PayReq)

	again := f.processor(t)
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if err := again.Verify(ctx, payments.Charge{Amount: 7}, req); err != nil {
		t.Fatalf("after a restart: %v; log:\n%s", err, f.log)
	}
	if !strings.Contains(f.log.String(), "asked for before a restart") {
		t.Errorf("no word of the restart in the log:\n%s", f.log)
	}
}

// An invoice the processor never asked for, or one shown with another
// price, is never settled.
func TestProcessor_SettlesOnlyWhatItAskedFor(t *testing.T) {
	f := newFixture(t)
	p := f.processor(t)
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	_, desc := f.zapRequest(t, 10_000, f.key)
	stranger := payments.PaymentRequired{Amount: 10, PayReq: f.invoice(t, 10_000, desc), PMI: payments.PMILightningBolt11}
	if err := p.Verify(ctx, payments.Charge{Amount: 10}, stranger); !errors.Is(err, zap.ErrUnknown) {
		t.Errorf("an invoice it never asked for: %v", err)
	}
	req := f.require(t, p, 10)
	if err := p.Verify(ctx, payments.Charge{Amount: 9}, req); !errors.Is(err, zap.ErrUnknown) {
		t.Errorf("its invoice for another price: %v", err)
	}
}

// Verify gives up with its context.
func TestProcessor_VerifyStopsWithItsContext(t *testing.T) {
	f := newFixture(t)
	p := f.processor(t)
	req := f.require(t, p, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Verify(ctx, payments.Charge{Amount: 10}, req); !errors.Is(err, context.Canceled) {
		t.Errorf("verify with a cancelled context: %v", err)
	}
}
