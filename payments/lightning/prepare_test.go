package lightning_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
)

// countingWallet records the invoices it made.
type countingWallet struct {
	payments.Wallet
	mu   sync.Mutex
	made []string
}

func (w *countingWallet) MakeInvoice(ctx context.Context, msat int64, description string, ttl time.Duration) (payments.Invoice, error) {
	inv, err := w.Wallet.MakeInvoice(ctx, msat, description, ttl)
	if err == nil {
		w.mu.Lock()
		w.made = append(w.made, inv.Bolt11)
		w.mu.Unlock()
	}
	return inv, err
}

func (w *countingWallet) invoices() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.made...)
}

// A request at a price asked before gets the invoice made ahead for it,
// and the next one is made meanwhile; another price gets its own; an
// invoice made ahead too long ago is not handed out.
func TestRequireHandsOutAnInvoiceMadeAhead(t *testing.T) {
	now := time.Now()
	var clock sync.Mutex
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	w := &countingWallet{Wallet: server}
	proc := lightning.NewProcessor(w, lightning.ProcessorOptions{TTL: 100 * time.Second, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	defer proc.Close()
	charge := payments.Charge{Amount: 5, Description: "tool:add"}
	first, err := proc.Require(context.Background(), charge)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "an invoice made ahead", func() bool { return lightning.PreparedForTest(proc) == 1 })
	second, err := proc.Require(context.Background(), charge)
	if err != nil {
		t.Fatal(err)
	}
	if made := w.invoices(); second.PayReq != made[1] || first.PayReq != made[0] || second.TTL < 90 || second.TTL > 100 {
		t.Fatalf("second request got %.20s… (TTL %d); want the invoice made ahead, %.20s…", second.PayReq, second.TTL, made[1])
	}
	testwait.Eventually(t, 10*time.Second, "the next invoice made ahead", func() bool { return lightning.PreparedForTest(proc) == 1 })
	other, err := proc.Require(context.Background(), payments.Charge{Amount: 6, Description: "tool:add"})
	if err != nil || other.PayReq != w.invoices()[3] || other.Amount != 6 {
		t.Fatalf("another price: %+v %v; want an invoice of its own, made when asked", other, err)
	}
	clock.Lock()
	now = now.Add(11 * time.Second) // past a tenth of the TTL
	clock.Unlock()
	stale := w.invoices()[2]
	third, err := proc.Require(context.Background(), charge)
	if err != nil || third.PayReq == stale {
		t.Fatalf("after a tenth of the TTL: %.20s… %v; want a fresh invoice, not the one made ahead", third.PayReq, err)
	}
}

// With Prepared negative, and after Close, every invoice is made when
// asked and none ahead.
func TestRequireMakesNoneAheadWhenToldNotTo(t *testing.T) {
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	for _, name := range []string{"negative", "closed"} {
		w := &countingWallet{Wallet: server}
		opts := lightning.ProcessorOptions{}
		if name == "negative" {
			opts.Prepared = -1
		}
		proc := lightning.NewProcessor(w, opts)
		if name == "closed" {
			proc.Close()
		}
		for range 3 {
			if _, err := proc.Require(context.Background(), payments.Charge{Amount: 5}); err != nil {
				t.Fatal(err)
			}
		}
		proc.Close() // waits for any making under way
		if n := len(w.invoices()); n != 3 {
			t.Fatalf("%s: %d invoices made for 3 requests", name, n)
		}
	}
}
