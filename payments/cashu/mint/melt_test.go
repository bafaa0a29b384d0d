package mint

import (
	"context"
	"testing"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

func TestMelt_FailedPaymentReturnsProofsUnspent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	proofs := f.mint(t, 8, 4)
	// An invoice of the mint's own wallet: the simulator refuses to pay
	// it (PAYMENT_FAILED), as a route that fails.
	mw, _ := f.net.Wallet("mint")
	inv, err := mw.MakeInvoice(ctx, 12_000, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.m.MeltQuote(ctx, cashu.MeltQuoteBolt11Request{Request: inv.Bolt11, Unit: "sat"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.m.Melt(ctx, cashu.MeltBolt11Request{Quote: q.Quote, Inputs: proofs, Outputs: cashu.Messages(f.outputs(t, 1))})
	wantCode(t, err, cashu.CodeLightningFailed)
	if st := f.states(t, proofs...); st[0] != cashu.StateUnspent || st[1] != cashu.StateUnspent {
		t.Fatalf("proofs of a failed melt are %v", st)
	}
	if g, _ := f.m.GetMeltQuote(ctx, q.Quote); g.State != cashu.QuoteUnpaid {
		t.Fatalf("failed melt's quote is %s", g.State)
	}
	// Unspent indeed: they swap.
	if _, err := f.swap(t, proofs, 4, 8); err != nil {
		t.Fatal(err)
	}
}

func TestMelt_RefusesTooFewInputs(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.FeeReserve = 2 })
	ctx := context.Background()
	inv, _ := f.alice.MakeInvoice(ctx, 8_000, "", time.Hour)
	q, err := f.m.MeltQuote(ctx, cashu.MeltQuoteBolt11Request{Request: inv.Bolt11, Unit: "sat"})
	if err != nil || q.FeeReserve != 2 {
		t.Fatalf("quote %+v: %v", q, err)
	}
	proofs := f.mint(t, 8)
	_, err = f.m.Melt(ctx, cashu.MeltBolt11Request{Quote: q.Quote, Inputs: proofs})
	wantCode(t, err, cashu.CodeUnbalanced)
	if st := f.states(t, proofs...); st[0] != cashu.StateUnspent {
		t.Fatalf("proof of a refused melt is %s", st[0])
	}
}

// blocking is a Lightning whose payments wait for release.
type blocking struct {
	Lightning
	started chan struct{}
	release chan struct{}
}

func (b *blocking) PayInvoice(ctx context.Context, s string) (string, error) {
	close(b.started)
	<-b.release
	return b.Lightning.PayInvoice(ctx, s)
}

func TestMelt_ProofsPendingWhilePaying(t *testing.T) {
	b := &blocking{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, func(o *Options) { b.Lightning = o.Lightning; o.Lightning = b })
	ctx := context.Background()
	proofs := f.mint(t, 16)
	inv, _ := f.alice.MakeInvoice(ctx, 16_000, "", time.Hour)
	q, err := f.m.MeltQuote(ctx, cashu.MeltQuoteBolt11Request{Request: inv.Bolt11, Unit: "sat"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.m.Melt(ctx, cashu.MeltBolt11Request{Quote: q.Quote, Inputs: proofs})
		done <- err
	}()
	<-b.started
	if st := f.states(t, proofs...); st[0] != cashu.StatePending {
		t.Fatalf("proof of a melt under way is %s", st[0])
	}
	if g, _ := f.m.GetMeltQuote(ctx, q.Quote); g.State != cashu.QuotePending {
		t.Fatalf("quote under way is %s", g.State)
	}
	_, err = f.swap(t, proofs, 16)
	wantCode(t, err, cashu.CodeProofsPending)
	_, err = f.m.Melt(ctx, cashu.MeltBolt11Request{Quote: q.Quote, Inputs: f.mint(t, 16)})
	wantCode(t, err, cashu.CodeQuotePending)
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := f.states(t, proofs...); st[0] != cashu.StateSpent {
		t.Fatalf("proof of a paid melt is %s", st[0])
	}
}
