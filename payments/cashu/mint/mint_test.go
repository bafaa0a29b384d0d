package mint

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
	"github.com/cvmgo/cvm/payments/lnsim"
)

func TestMint_MintSwapMeltThroughLightning(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	proofs := f.mint(t, 1, 4, 8)
	if got := f.states(t, proofs...); !reflect.DeepEqual(got, []string{"UNSPENT", "UNSPENT", "UNSPENT"}) {
		t.Fatalf("fresh proofs %v", got)
	}
	swapped, err := f.swap(t, proofs, 1, 2, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.states(t, proofs...); !reflect.DeepEqual(got, []string{"SPENT", "SPENT", "SPENT"}) {
		t.Fatalf("swapped proofs %v", got)
	}
	// Someone handed the swapped proofs checks them offline (NUT-12, Carol).
	for _, p := range swapped {
		if err := p.VerifyDLEQ(f.m.Keyset().Keys[p.Amount]); err != nil {
			t.Fatal(err)
		}
	}

	inv, err := f.alice.MakeInvoice(ctx, 10_000, "melt", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.net.Balance("alice")
	q, err := f.m.MeltQuote(ctx, cashu.MeltQuoteBolt11Request{Request: inv.Bolt11, Unit: "sat"})
	if err != nil {
		t.Fatal(err)
	}
	if q.Amount != 10 || q.State != cashu.QuoteUnpaid {
		t.Fatalf("melt quote %+v", q)
	}
	// 13 sats for a 10-sat invoice: 3 come back as change (2 + 1).
	blank := f.outputs(t, 1, 1, 1)
	resp, err := f.m.Melt(ctx, cashu.MeltBolt11Request{Quote: q.Quote, Inputs: swapped, Outputs: cashu.Messages(blank)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.State != cashu.QuotePaid || resp.PaymentPreimage == nil || len(resp.Change) != 2 {
		t.Fatalf("melt answered %+v", resp)
	}
	after, _ := f.net.Balance("alice")
	if after-before != 10_000 {
		t.Fatalf("alice received %d msat, want 10000", after-before)
	}
	var change uint64
	for i, s := range resp.Change {
		blank[i].Message.Amount = s.Amount
		p, err := blank[i].Proof(s, f.m.Keyset().Keys[s.Amount])
		if err != nil {
			t.Fatal(err)
		}
		change += p.Amount
	}
	if change != 3 {
		t.Fatalf("change %d, want 3", change)
	}
	// Three blank outputs for 3 sats of change: the unused one is not
	// taken, and can be sent again.
	if _, err := f.m.Swap(ctx, cashu.SwapRequest{Inputs: f.mint(t, 1), Outputs: []cashu.BlindedMessage{{Amount: 1, ID: blank[2].Message.ID, B: blank[2].Message.B}}}); err != nil {
		t.Fatalf("an unused blank output: %v", err)
	}
	if got := f.states(t, swapped...); got[0] != "SPENT" || got[3] != "SPENT" {
		t.Fatalf("melted proofs %v", got)
	}
	if g, _ := f.m.GetMeltQuote(ctx, q.Quote); g.State != cashu.QuotePaid {
		t.Fatalf("melt quote after paying: %s", g.State)
	}
	// The invoice is paid: melting it again is refused.
	more := f.mint(t, 16)
	_, err = f.m.Melt(ctx, cashu.MeltBolt11Request{Quote: q.Quote, Inputs: more})
	wantCode(t, err, cashu.CodeInvoiceAlreadyPaid)
}

func TestMint_NothingMintedWithoutPayment(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	q, err := f.m.MintQuote(ctx, cashu.MintQuoteBolt11Request{Amount: 8, Unit: "sat"})
	if err != nil {
		t.Fatal(err)
	}
	outs := f.outputs(t, 8)
	_, err = f.m.MintTokens(ctx, cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(outs)})
	wantCode(t, err, cashu.CodeQuoteNotPaid)
	if g, _ := f.m.GetMintQuote(ctx, q.Quote); g.State != cashu.QuoteUnpaid {
		t.Fatalf("unpaid quote reads %s", g.State)
	}
	if _, err := f.alice.PayInvoice(ctx, q.Request); err != nil {
		t.Fatal(err)
	}
	// Polling the quote finds it paid (a lookup: this Lightning has no
	// notifications).
	if g, _ := f.m.GetMintQuote(ctx, q.Quote); g.State != cashu.QuotePaid {
		t.Fatalf("paid quote reads %s", g.State)
	}
	// Outputs must add up to the quote.
	_, err = f.m.MintTokens(ctx, cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(f.outputs(t, 4))})
	wantCode(t, err, cashu.CodeUnbalanced)
	first, err := f.m.MintTokens(ctx, cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(outs)})
	if err != nil {
		t.Fatal(err)
	}
	// The same request again (a lost answer) gets the same signatures;
	// any other request for the quote is refused.
	again, err := f.m.MintTokens(ctx, cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(outs)})
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("the same mint request again: %v", err)
	}
	_, err = f.m.MintTokens(ctx, cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(f.outputs(t, 8))})
	wantCode(t, err, cashu.CodeQuoteIssued)
	if g, _ := f.m.GetMintQuote(ctx, q.Quote); g.State != cashu.QuoteIssued {
		t.Fatalf("issued quote reads %s", g.State)
	}
	// Paying the quote's invoice twice is refused by Lightning itself.
	if _, err := f.alice.PayInvoice(ctx, q.Request); err == nil {
		t.Fatal("an invoice paid twice")
	}
}

// notifying is a Lightning whose lookups never find a payment and whose
// notifications come from the simulator: a quote can only turn PAID on a
// notification.
type notifying struct {
	Lightning
	mu    sync.Mutex
	heard map[string]chan payments.Invoice
}

func (n *notifying) ch(hash string) chan payments.Invoice {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.heard[hash] == nil {
		n.heard[hash] = make(chan payments.Invoice, 1)
	}
	return n.heard[hash]
}

func (n *notifying) LookupInvoice(context.Context, string) (payments.Invoice, error) {
	return payments.Invoice{}, nil
}

func (n *notifying) Received(ctx context.Context, hash string) (payments.Invoice, error) {
	select {
	case inv := <-n.ch(hash):
		return inv, nil
	case <-ctx.Done():
		return payments.Invoice{}, ctx.Err()
	}
}

func TestMint_QuotePaidOnNotification(t *testing.T) {
	var n *notifying
	f := newFixture(t, func(o *Options) {
		n = &notifying{Lightning: o.Lightning, heard: map[string]chan payments.Invoice{}}
		o.Lightning = n
	})
	ctx := context.Background()
	stop := f.net.OnSettle(func(s lnsim.Settlement) { n.ch(s.Invoice.PaymentHash) <- s.Invoice })
	defer stop()
	q, err := f.m.MintQuote(ctx, cashu.MintQuoteBolt11Request{Amount: 2, Unit: "sat"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.PayInvoice(ctx, q.Request); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the quote to be PAID after its notification", func() bool {
		g, err := f.m.GetMintQuote(ctx, q.Quote)
		if err != nil {
			t.Fatal(err)
		}
		return g.State == cashu.QuotePaid
	})
}

func TestSwap_InputFeesAreCharged(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.InputFeePPK = 400 })
	if got := f.m.Keyset().InputFeePPK; got != 400 {
		t.Fatalf("keyset fee %d", got)
	}
	proofs := f.mint(t, 4, 8, 16)
	// Three inputs at 400 ppk: ceil(1.2) = 2 sats of fee.
	_, err := f.swap(t, proofs, 4, 8, 16)
	wantCode(t, err, cashu.CodeUnbalanced)
	if _, err := f.swap(t, proofs, 2, 8, 16); err != nil {
		t.Fatal(err)
	}
}
