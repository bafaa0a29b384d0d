package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Cap is the price a server announced for a capability (a CEP-8 cap tag):
// a fixed amount (Low == High) or a range. A price charged for the
// capability must fall inside it.
type Cap struct {
	Capability string // "tool:NAME", "prompt:NAME" or "resource:URI"
	Low, High  float64
	Unit       string
}

// Contains reports whether amount lies within the cap.
func (c Cap) Contains(amount int64) bool {
	a := float64(amount)
	return a >= c.Low && a <= c.High
}

// PriceRequest is what a Pricer prices: one request for a priced
// capability.
type PriceRequest struct {
	Cap    Cap
	Method string          // tools/call, prompts/get, resources/read
	Params json.RawMessage // as the client sent them
	// Client and RequestID are as in Charge.
	Client    string
	RequestID string
}

// Quote is a Pricer's answer: the amount to charge, in the cap's unit, or
// Waive to let the request run free.
type Quote struct {
	Amount      int64
	Description string
	Waive       bool
}

// Pricer says what a request costs. It may waive the price (Quote.Waive)
// or refuse the request (an error wrapping ErrRefused, see Refuse).
type Pricer interface {
	Price(ctx context.Context, r PriceRequest) (Quote, error)
}

// PricerFunc is a Pricer computed from the request.
type PricerFunc func(ctx context.Context, r PriceRequest) (Quote, error)

// Price calls f.
func (f PricerFunc) Price(ctx context.Context, r PriceRequest) (Quote, error) { return f(ctx, r) }

// Errors of pricing.
var (
	// ErrRefused is wrapped by a Pricer's refusal to serve a request at any
	// price; its message is for the client.
	ErrRefused = errors.New("the server refused to price this request")
	// ErrOutOfRange means a computed price falls outside the announced cap:
	// it is never charged, since the client was told otherwise.
	ErrOutOfRange = errors.New("computed price outside the announced price")
)

// Refuse is a Pricer's refusal, with a message for the client.
func Refuse(message string) error { return fmt.Errorf("%w: %s", ErrRefused, message) }

// Announced charges what the cap says: the amount of a fixed price, the
// lowest amount of a range (a server that prices within a range says how
// with a PricerFunc). A fractional amount is rounded up.
var Announced Pricer = PricerFunc(func(_ context.Context, r PriceRequest) (Quote, error) {
	return Quote{Amount: int64(math.Ceil(r.Cap.Low))}, nil
})

// Resolve asks p (Announced when nil) for the price of r and checks it: a
// refusal wraps ErrRefused; a price outside the announced cap, or
// negative, wraps ErrOutOfRange. A zero price is a waiver.
func Resolve(ctx context.Context, p Pricer, r PriceRequest) (Quote, error) {
	if p == nil {
		p = Announced
	}
	q, err := p.Price(ctx, r)
	if err != nil {
		return Quote{}, err
	}
	if q.Waive {
		return q, nil
	}
	if q.Amount < 0 || !r.Cap.Contains(q.Amount) {
		return Quote{}, fmt.Errorf("%w: %d %s for %s, announced %s", ErrOutOfRange, q.Amount, r.Cap.Unit, r.Cap.Capability, r.Cap.amountText())
	}
	if q.Amount == 0 {
		q.Waive = true
	}
	return q, nil
}

func (c Cap) amountText() string {
	if c.Low == c.High {
		return fmt.Sprintf("%g %s", c.Low, c.Unit)
	}
	return fmt.Sprintf("%g-%g %s", c.Low, c.High, c.Unit)
}
