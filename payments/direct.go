package payments

import (
	"context"
	"errors"
	"fmt"
)

// Direct payments (CEP-8's optional direct_payment): a bearer asset, such
// as Cashu ecash, travels in the request itself, and the server redeems it
// before the request runs, returning what it does not keep as change. No
// payment request, no wallet round trip: a priced call costs one round
// trip. The rails are a Redeemer on the server and a Bearer on the client,
// one per PMI (CEP-21 names such PMIs with the "-direct" suffix).

// Reasons a Redeemer rejects a payload. Each wraps into a *RejectedError.
var (
	// ErrInsufficient: the payload is worth less than the price and the
	// redeemer's fees (RejectedError.Required says how much is needed).
	ErrInsufficient = errors.New("direct payment worth less than required")
	// ErrInvalidPayload: the payload cannot be read, or is forged.
	ErrInvalidPayload = errors.New("direct payment not valid")
	// ErrSpent: the payload was spent already (or is being spent by
	// another request).
	ErrSpent = errors.New("direct payment already spent")
	// ErrForeign: the payload is of an issuer (a Cashu mint) or a unit the
	// server does not accept.
	ErrForeign = errors.New("direct payment from an issuer not accepted here")
)

// RejectedError is a Redeemer's refusal of a payload it did not consume:
// the bearer asset is still the client's, and CEP-8's payment_rejected
// tells it so. Any other error from Redeem leaves the payload's fate
// unknown (a mint that failed mid-swap), and nothing may be said to the
// client about it but that.
type RejectedError struct {
	// Required is the amount that would have been accepted (the price and
	// the redeemer's fees), set when the payload was worth too little.
	Required int64
	Err      error // one of ErrInsufficient, ErrInvalidPayload, ErrSpent, ErrForeign, possibly wrapped
}

func (e *RejectedError) Error() string {
	if e.Required > 0 {
		return fmt.Sprintf("direct payment rejected, not consumed: %v (%d required)", e.Err, e.Required)
	}
	return fmt.Sprintf("direct payment rejected, not consumed: %v", e.Err)
}

func (e *RejectedError) Unwrap() error { return e.Err }

// Reject is a RejectedError of err; required is the amount needed when the
// payload was worth too little, 0 otherwise.
func Reject(err error, required int64) error { return &RejectedError{Required: required, Err: err} }

// Redeemed is what a Redeemer took from a payload.
type Redeemed struct {
	// Amount is what the server kept: the price and the redeemer's fees.
	// It is CEP-8's "final amount charged" on payment_accepted.
	Amount int64
	// Change is the remainder, as a payload of the same PMI that only the
	// client can now spend (CEP-8's change tag), "" when none; ChangeAmount
	// is its value.
	Change       string
	ChangeAmount int64
}

// Redeemer is a direct payment method on the server side. The gate calls
// Redeem at most once per payload and per request (it records both
// before), from any goroutine, possibly at the same time for different
// requests.
type Redeemer interface {
	PMI() string
	// Redeem takes c.Amount (in c.Unit) from payload. It must check that
	// the payload is valid and worth at least c.Amount plus its own fees
	// before it consumes anything, and return a *RejectedError (Reject)
	// when it is not: the client then keeps the payload. Once it returns
	// nil the value is the server's and the change the client's; any
	// other error means the payload may or may not have been consumed.
	// Its errors go to the client and the log: they never quote the
	// payload, which is money.
	Redeem(ctx context.Context, c Charge, payload string) (Redeemed, error)
}

// Requirer is a Redeemer that can also ask for a direct payment in CEP-8's
// payment_required (a Cashu NUT-18 payment request: amount, unit and the
// issuers it accepts). The client answers it by sending the request again
// with a direct_payment tag, which is what the server then redeems: there
// is nothing to verify in between, so no Verify.
type Requirer interface {
	Require(ctx context.Context, c Charge) (PaymentRequired, error)
}

// Prepared is a payload a Bearer took out of its wallet for a payment.
type Prepared struct {
	Payload string
	// Value is what the payload is worth: at least the amount asked for
	// (exactly it when the wallet could split its value), at most the
	// maximum given. The remainder comes back as change.
	Value int64
}

// Bearer is a direct payment method on the client side: a wallet of bearer
// assets. The client prepares a payload for a request, and learns its fate
// from the server: accepted (the change is kept), rejected (the payload
// goes back), or neither (the answer was lost: the payload stays out of the
// wallet, since the server may have it). Its methods may be called from
// several goroutines at once.
type Bearer interface {
	PMI() string
	// Prepare takes out of the wallet a payload worth at least amount and
	// at most maxValue, for a payment of amount. payReq is the server's
	// payment request when the payment answers one (its PMI-defined
	// terms, such as the issuers accepted), "" when the payment goes with
	// the request unasked, at a price the server announced. Two payloads
	// prepared never share value.
	Prepare(ctx context.Context, amount, maxValue int64, payReq string) (Prepared, error)
	// KeepChange receives into the wallet a change payload the server
	// returned, and reports what it was worth. Change the wallet holds
	// already (sent again by a server that could not tell it arrived) is
	// an error, and worth nothing more.
	KeepChange(ctx context.Context, payload string) (int64, error)
	// Restore puts back into the wallet a prepared payload the server did
	// not take: one it rejected (CEP-8: not consumed), or one its call's
	// answer said nothing of (an error, -32015). The server's word is no
	// proof, and in the second case there is none: the wallet checks with
	// the payload's issuer that it is unspent (Cashu: NUT-07) and refuses
	// it otherwise, so that no spent value is counted twice.
	Restore(ctx context.Context, payload string) error
}
