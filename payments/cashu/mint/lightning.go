package mint

import (
	"context"
	"time"

	"github.com/cvmgo/cvm/payments"
)

// Lightning is the mint's Lightning side: a wallet that makes the invoices
// of mint quotes, tells whether one is paid, and pays the invoices of melt
// quotes. A payments.Wallet, so a Nostr Wallet Connect client (package
// payments/nwc) is one. Methods may be called concurrently.
type Lightning interface {
	MakeInvoice(ctx context.Context, amountMsat int64, description string, expiry time.Duration) (payments.Invoice, error)
	LookupInvoice(ctx context.Context, paymentHash string) (payments.Invoice, error)
	// PayInvoice pays a BOLT11 invoice. An error that is a
	// *payments.WalletError is a payment that failed; any other leaves it
	// unknown, and the melt stays pending until a lookup settles it.
	PayInvoice(ctx context.Context, bolt11 string) (preimage string, err error)
}

// Notifier is what a Lightning may also do: wait for the payment of an
// invoice it made (NIP-47's payment_received; nwc.Client.Received once
// Listen said the wallet sends them). With one, a mint quote turns PAID
// when the notification comes; without, when the quote is next read.
type Notifier interface {
	Received(ctx context.Context, paymentHash string) (payments.Invoice, error)
}
