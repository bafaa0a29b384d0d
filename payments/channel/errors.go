package channel

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a payment error code: NIP-4's PaymentErrorCode values, of which
// cvm's channels use these.
type Code string

// The codes a channel refuses a receipt, a top-up, a close or a refund with.
const (
	// CodeConflict: the nonce is not the next, or the amount is not the
	// last accepted plus this call's price.
	CodeConflict Code = "RAV_CONFLICT"
	// CodeDuplicate: the receipt is the last one accepted, sent again (a
	// retried request); the call it paid for is answered from its records.
	CodeDuplicate Code = "RAV_DUPLICATE"
	// CodeInsufficientFunds: the amount would exceed the deposit; top up.
	CodeInsufficientFunds Code = "HUB_INSUFFICIENT_FUNDS"
	// CodeEpochMismatch: the receipt names another epoch of the channel.
	CodeEpochMismatch Code = "EPOCH_MISMATCH"
	// CodeNotFound: no open channel of this client has the id.
	CodeNotFound Code = "CHANNEL_NOT_FOUND"
	// CodeClosed: the channel is closed (by its client or idle past the
	// server's TTL); its unspent deposit is owed, to the invoice the client
	// sends.
	CodeClosed Code = "CHANNEL_CLOSED"
	// CodeTampered: the receipt's version, chain or fragment are not the
	// channel's.
	CodeTampered Code = "TAMPERED_SUBRAV"
	// CodeInvalidSignature: the header's signature does not verify.
	CodeInvalidSignature Code = "INVALID_SIGNATURE"
	// CodeMaxAmountExceeded: the call's price is above the request's
	// maxAmount (HTTP).
	CodeMaxAmountExceeded Code = "BILLING_MAX_AMOUNT_EXCEEDED"
	// CodeAuthMissing: over HTTP, a receipt on a request that is not
	// signed (DIDAuthV1): the channel is the signing key's.
	CodeAuthMissing Code = "AUTH_MISSING"
	// CodeMalformed (cvm's): the header is not a request payload (no
	// signedSubRav or clientTxRef, a bad encoding), or the call cannot be
	// paid by a channel (a price not in sats).
	CodeMalformed Code = "INVALID_PAYMENT_DATA"
)

// HTTPStatus is the status an HTTP answer carries the code with (NIP-4's
// mapping; RAV_DUPLICATE, cvm's own, as a conflict).
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInsufficientFunds:
		return http.StatusPaymentRequired
	case CodeConflict, CodeDuplicate:
		return http.StatusConflict
	case CodeNotFound:
		return http.StatusNotFound
	case CodeEpochMismatch, CodeClosed, CodeTampered, CodeInvalidSignature, CodeMaxAmountExceeded,
		CodeAuthMissing, CodeMalformed:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// Error is a refusal: its code, and the channel's state as the server holds
// it (nil for an unknown channel), from which the client makes its next
// receipt. Match with errors.Is against the Err values, or errors.As.
type Error struct {
	Code    Code
	Message string
	State   *State
}

func (e *Error) Error() string { return fmt.Sprintf("channel: %s: %s", e.Code, e.Message) }

// Is matches an Error of the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Payload is the error as NIP-4's error payload: the code, the message, and
// the channel's state as subRav (its last accepted receipt) and deposit.
func (e *Error) Payload() Payload {
	p := Payload{Version: Version, Error: &PayloadError{Code: e.Code, Message: e.Message}}
	if e.State != nil {
		r := e.State.Receipt()
		p.SubRAV = &r
		p.Deposit = Amount(e.State.Deposit)
	}
	return p
}

// Errors to match with errors.Is.
var (
	ErrConflict          = &Error{Code: CodeConflict}
	ErrDuplicate         = &Error{Code: CodeDuplicate}
	ErrInsufficientFunds = &Error{Code: CodeInsufficientFunds}
	ErrEpochMismatch     = &Error{Code: CodeEpochMismatch}
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrClosed            = &Error{Code: CodeClosed}
	ErrTampered          = &Error{Code: CodeTampered}
)

// Refuse returns the refusal of code c, with the channel's state s (nil
// when unknown) and a message for people.
func Refuse(c Code, s *State, format string, args ...any) *Error {
	return refuse(c, s, format, args...)
}

func refuse(c Code, s *State, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...), State: s}
}
