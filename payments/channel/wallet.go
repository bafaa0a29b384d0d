package channel

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// WalletRefunder is a Refunder that pays refunds with a wallet's
// pay_invoice (payments.Wallet: NWC, lnsim).
type WalletRefunder struct {
	Wallet payments.Wallet
}

// notSent are the wallet errors (NIP-47) by which a wallet refuses a
// payment before it sends anything.
var notSent = map[string]bool{
	payments.CodeInsufficientBalance:   true,
	payments.CodeQuotaExceeded:         true,
	payments.CodeRateLimited:           true,
	payments.CodeUnsupportedEncryption: true,
}

// PayRefund pays invoice through the wallet. A wallet that refused the
// payment before sending it (insufficient balance, quota, rate limit)
// gives an error wrapping ErrNotPaid; any other error may hide a payment
// made, and leaves the invoice to be paid again. An invoice the wallet
// paid before (a refund retried after a crash) is refused by the wallet;
// its preimage is then read with lookup_invoice.
func (w WalletRefunder) PayRefund(ctx context.Context, invoice string, _ uint64) (string, error) {
	preimage, err := w.Wallet.PayInvoice(ctx, invoice)
	if err == nil {
		return preimage, nil
	}
	var werr *payments.WalletError
	if errors.As(err, &werr) && notSent[werr.Code] {
		return "", fmt.Errorf("%w: %w", ErrNotPaid, err)
	}
	if inv, derr := bolt11.Decode(invoice); derr == nil {
		if got, lerr := w.Wallet.LookupInvoice(ctx, hex.EncodeToString(inv.Hash[:])); lerr == nil && got.Settled() && got.Preimage != "" {
			return got.Preimage, nil
		}
	}
	return "", err
}
