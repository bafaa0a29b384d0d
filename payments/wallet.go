package payments

import (
	"context"
	"fmt"
	"time"
)

// PMILightningBolt11 is the payment method of Lightning invoices (CEP-21):
// pay_req is a BOLT11 invoice.
const PMILightningBolt11 = "bitcoin-lightning-bolt11"

// Wallet is what the Lightning payment method needs of a wallet. Amounts
// are in millisatoshis, as in NIP-47 and BOLT11.
type Wallet interface {
	// MakeInvoice asks the wallet for an invoice to receive amountMsat.
	MakeInvoice(ctx context.Context, amountMsat int64, description string, expiry time.Duration) (Invoice, error)
	// LookupInvoice returns what the wallet knows of the invoice with
	// paymentHash (hex): whether it is settled.
	LookupInvoice(ctx context.Context, paymentHash string) (Invoice, error)
	// PayInvoice pays a BOLT11 invoice and returns its preimage (hex).
	PayInvoice(ctx context.Context, bolt11 string) (preimage string, err error)
}

// Invoice is a Lightning invoice as a wallet reports it.
type Invoice struct {
	Bolt11      string
	PaymentHash string // hex
	AmountMsat  int64
	Description string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	// SettledAt is when it was paid, zero while it is not; Preimage (hex)
	// is known once it is.
	SettledAt time.Time
	Preimage  string
}

// Settled reports whether the invoice has been paid.
func (i Invoice) Settled() bool { return !i.SettledAt.IsZero() }

// WalletError is an error a wallet answered with: a NIP-47 code
// (INSUFFICIENT_BALANCE, QUOTA_EXCEEDED, NOT_FOUND, RATE_LIMITED,
// UNSUPPORTED_ENCRYPTION, PAYMENT_FAILED, …) and its message.
type WalletError struct {
	Code    string
	Message string
}

func (e *WalletError) Error() string {
	return fmt.Sprintf("wallet: %s: %s", e.Code, e.Message)
}

// Wallet error codes of NIP-47 that callers act on.
const (
	CodeInsufficientBalance   = "INSUFFICIENT_BALANCE"
	CodeQuotaExceeded         = "QUOTA_EXCEEDED"
	CodeNotFound              = "NOT_FOUND"
	CodeRateLimited           = "RATE_LIMITED"
	CodeUnsupportedEncryption = "UNSUPPORTED_ENCRYPTION"
	CodePaymentFailed         = "PAYMENT_FAILED"
	CodeNotImplemented        = "NOT_IMPLEMENTED"
	CodeRestricted            = "RESTRICTED"
	CodeInternal              = "INTERNAL"
	CodeOther                 = "OTHER"
)
