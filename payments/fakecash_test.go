package payments_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/payments"
)

// The fake cash rail checks a payload whole before it consumes anything:
// a forged, foreign, insufficient or spent payload is rejected (a
// *RejectedError, with the amount required when it is worth too little)
// and stays the client's; a good one pays exactly the price and fee, and
// the rest comes back as change only the client's wallet then holds.
func TestFakeCash_RedeemChecksBeforeConsuming(t *testing.T) {
	ctx := context.Background()
	mint := payments.NewFakeMint("m")
	srv := payments.NewFakeWallet(mint)
	r := &payments.FakeRedeemer{Mint: mint, Payee: srv, Fee: 1}
	alice := payments.NewFakeWallet(mint, 5, 16)
	charge := payments.Charge{Amount: 10, Unit: "sats", RequestID: "r1"}

	rejected := func(payload string, want error, required int64) {
		t.Helper()
		_, err := r.Redeem(ctx, charge, payload)
		var rej *payments.RejectedError
		if !errors.As(err, &rej) || !errors.Is(err, want) || rej.Required != required {
			t.Fatalf("redeem %.30q: %v; want a rejection wrapping %v, %d required", payload, err, want, required)
		}
	}
	small, err := alice.Prepare(ctx, 5, 100, "")
	if err != nil || small.Value != 5 {
		t.Fatalf("prepare 5: %+v %v", small, err)
	}
	rejected(small.Payload, payments.ErrInsufficient, 11)
	rejected("fakecash:m:0011223344556677", payments.ErrInvalidPayload, 0)
	rejected("cashuBgarbage", payments.ErrInvalidPayload, 0)
	rejected(payments.FakeCashPayload("elsewhere", "00"), payments.ErrForeign, 0)
	if err := alice.Restore(ctx, small.Payload); err != nil {
		t.Fatalf("the rejected payload did not go back: %v", err)
	}
	if b := alice.Balance(); b != 21 {
		t.Fatalf("alice has %d after rejections; want 21", b)
	}

	big, err := alice.Prepare(ctx, 11, 100, "")
	if err != nil || big.Value != 16 {
		t.Fatalf("prepare 11: %+v %v; want the 16 note, the smallest cover", big, err)
	}
	red, err := r.Redeem(ctx, charge, big.Payload)
	if err != nil || red.Amount != 11 || red.ChangeAmount != 5 || red.Change == "" {
		t.Fatalf("redeem: %+v %v", red, err)
	}
	rejected(big.Payload, payments.ErrSpent, 0)
	if v, err := alice.KeepChange(ctx, red.Change); err != nil || v != 5 {
		t.Fatalf("keep change: %d %v", v, err)
	}
	if _, err := alice.KeepChange(ctx, red.Change); !errors.Is(err, payments.ErrSpent) {
		t.Fatalf("the same change kept twice: %v", err)
	}
	if err := alice.Restore(ctx, big.Payload); !errors.Is(err, payments.ErrSpent) {
		t.Fatalf("a spent payload went back to the wallet: %v", err)
	}
	if a, s := alice.Balance(), srv.Balance(); a != 10 || s != 11 {
		t.Fatalf("alice %d, server %d; want 10 and 11", a, s)
	}
}

// Of requests racing to redeem one payload, exactly one does; the others
// are rejected (not consumed by them).
func TestFakeCash_RacingRedeemsOneWins(t *testing.T) {
	ctx := context.Background()
	mint := payments.NewFakeMint("m")
	srv := payments.NewFakeWallet(mint)
	r := &payments.FakeRedeemer{Mint: mint, Payee: srv}
	prep, err := payments.NewFakeWallet(mint, 10).Prepare(ctx, 10, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Go(func() {
			_, err := r.Redeem(ctx, payments.Charge{Amount: 10}, prep.Payload)
			var rej *payments.RejectedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.As(err, &rej):
				t.Errorf("a racing redeem failed otherwise: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || srv.Balance() != 10 {
		t.Fatalf("%d redeems won, server holds %d; want 1 and 10", won, srv.Balance())
	}
}

// A wallet pays a payment request of its mint and amount only, and never
// more than the most it is allowed.
func TestFakeCash_PrepareHoldsToTheRequestAndTheMost(t *testing.T) {
	ctx := context.Background()
	mint := payments.NewFakeMint("m")
	r := &payments.FakeRedeemer{Mint: mint}
	req, err := r.Require(ctx, payments.Charge{Amount: 7})
	if err != nil || req.PMI != payments.PMIFakeCash || req.Amount != 7 {
		t.Fatalf("require: %+v %v", req, err)
	}
	w := payments.NewFakeWallet(mint, 4, 4)
	if _, err := w.Prepare(ctx, 7, 100, strings.Replace(req.PayReq, ":7", ":6", 1)); err == nil {
		t.Fatal("paid a request for another amount")
	}
	if _, err := w.Prepare(ctx, 7, 7, req.PayReq); err == nil {
		t.Fatal("paid 8 with a most of 7")
	}
	if _, err := payments.NewFakeWallet(payments.NewFakeMint("other"), 10).Prepare(ctx, 7, 100, req.PayReq); err == nil {
		t.Fatal("paid a request of another mint")
	}
	p, err := w.Prepare(ctx, 7, 8, req.PayReq)
	if err != nil || p.Value != 8 || w.Balance() != 0 {
		t.Fatalf("prepare: %+v %v, %d left", p, err, w.Balance())
	}
}

func FuzzParseFakeCash(f *testing.F) {
	f.Add("fakecash:m:00,11")
	f.Add("fakecash::")
	f.Add("fakecash:m:" + strings.Repeat("a,", 100))
	f.Fuzz(func(t *testing.T, payload string) {
		mint, ids, err := payments.ParseFakeCash(payload)
		if err != nil {
			if !errors.Is(err, payments.ErrInvalidPayload) {
				t.Fatalf("error %v does not wrap ErrInvalidPayload", err)
			}
			return
		}
		if mint == "" || len(ids) == 0 || len(ids) > 64 {
			t.Fatalf("%q read as mint %q, %d notes", payload, mint, len(ids))
		}
		if got := payments.FakeCashPayload(mint, ids...); got != payload {
			t.Fatalf("%q read and written again as %q", payload, got)
		}
	})
}
