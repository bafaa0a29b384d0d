package zap

import "errors"

// Reasons a zap payment cannot be asked for, or a receipt settles
// nothing; errors wrap one of them.
var (
	// ErrAddress: not a Lightning address (NAME@HOST).
	ErrAddress = errors.New("zap: not a Lightning address")
	// ErrPayParams: the LNURL-pay endpoint's answer is not one a zap can
	// be paid through (not a payRequest, no callback, no allowsNostr or
	// nostrPubkey, the price outside its bounds).
	ErrPayParams = errors.New("zap: the Lightning address cannot be paid by zap")
	// ErrInvoice: the callback's invoice is not the one asked for.
	ErrInvoice = errors.New("zap: the LNURL callback's invoice is not the one asked for")
	// ErrRequest: not a valid zap request (kind 9734, NIP-57).
	ErrRequest = errors.New("zap: invalid zap request")
	// ErrReceipt: a zap receipt that does not settle the payment.
	ErrReceipt = errors.New("zap: the zap receipt does not settle this payment")
	// ErrUnknown: an invoice this processor has no pending zap for.
	ErrUnknown = errors.New("zap: no pending zap for this invoice")
	// ErrExpired: the invoice expired before its receipt was seen.
	ErrExpired = errors.New("zap: the invoice expired unpaid")
	// ErrMeta: the zap request in payment_required's _meta does not match
	// the invoice or the price.
	ErrMeta = errors.New("zap: the zap request of the payment request does not match its invoice")
)
