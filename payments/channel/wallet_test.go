package channel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cvmgo/cvm/payments"
)

// payWallet answers pay_invoice with err, and lookup_invoice with looked.
type payWallet struct {
	err    error
	looked payments.Invoice
	hashes []string
}

func (w *payWallet) MakeInvoice(context.Context, int64, string, time.Duration) (payments.Invoice, error) {
	return payments.Invoice{}, errors.New("not here")
}

func (w *payWallet) LookupInvoice(_ context.Context, hash string) (payments.Invoice, error) {
	w.hashes = append(w.hashes, hash)
	return w.looked, nil
}

func (w *payWallet) PayInvoice(context.Context, string) (string, error) {
	if w.err != nil {
		return "", w.err
	}
	return "0a2a", nil
}

// A wallet's refusal before sending frees the refund for another invoice
// (ErrNotPaid); any other failure does not, unless the wallet shows the
// invoice settled (paid before a crash), whose preimage is then the
// refund's.
func TestWalletRefunder(t *testing.T) {
	inv := (&refunder{}).invoice(t, time.Now(), 700, 1)
	ctx := context.Background()
	w := &payWallet{err: &payments.WalletError{Code: payments.CodeInsufficientBalance}}
	if _, err := (WalletRefunder{Wallet: w}).PayRefund(ctx, inv, 700); !errors.Is(err, ErrNotPaid) {
		t.Fatalf("insufficient balance: %v; want ErrNotPaid", err)
	}
	w = &payWallet{err: &payments.WalletError{Code: "PAYMENT_FAILED"}}
	if _, err := (WalletRefunder{Wallet: w}).PayRefund(ctx, inv, 700); err == nil || errors.Is(err, ErrNotPaid) {
		t.Fatalf("payment failed: %v; want an error that may hide a payment", err)
	}
	w.looked = payments.Invoice{SettledAt: time.Now(), Preimage: "0a2a"}
	if p, err := (WalletRefunder{Wallet: w}).PayRefund(ctx, inv, 700); err != nil || p != "0a2a" || len(w.hashes) != 2 {
		t.Fatalf("paid before: %q %v (looked up %q)", p, err, w.hashes)
	}
	if p, err := (WalletRefunder{Wallet: &payWallet{}}).PayRefund(ctx, inv, 700); err != nil || p != "0a2a" {
		t.Fatalf("paid: %q %v", p, err)
	}
}
