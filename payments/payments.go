package payments

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Charge is what a server asks a client to pay for one request.
type Charge struct {
	Amount      int64  // in Unit
	Unit        string // "sats" unless a PMI says otherwise
	Description string
	// RequestID identifies the request being paid for (for ContextVM, the
	// request event id): the idempotency key, never charged twice.
	RequestID string
	// Client is the paying client's identity (for ContextVM, its public
	// key, hex).
	Client string
}

// PaymentRequired is a processor's request for payment, as it travels in
// CEP-8's notifications/payment_required and in explicit gating's
// payment_options.
type PaymentRequired struct {
	Amount      int64           `json:"amount"`
	PayReq      string          `json:"pay_req"`
	PMI         string          `json:"pmi"`
	Description string          `json:"description,omitempty"`
	TTL         int64           `json:"ttl,omitempty"` // seconds
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// Processor is a payment method on the server side: it issues a payment
// request for a charge and verifies that it was paid.
type Processor interface {
	PMI() string
	// Require issues the payment request for c.
	Require(ctx context.Context, c Charge) (PaymentRequired, error)
	// Verify returns nil once the payment of req is verified, or an error
	// when it cannot be (expired, refused); it waits at most until ctx
	// ends.
	Verify(ctx context.Context, c Charge, req PaymentRequired) error
}

// Checker is a Processor that can look once, without waiting, whether a
// payment request is paid. A server asks it when a client sends a request
// again while its payment is awaited (CEP-8 explicit gating), to tell a
// client that paid, whose payment it then verifies at once, from one that
// has not, which it offers the same payment request again.
type Checker interface {
	// Paid reports whether req is paid now. It says nothing of the
	// amount or the proof: Verify checks those.
	Paid(ctx context.Context, c Charge, req PaymentRequired) (bool, error)
}

// Handler is a payment method on the client side: it pays a payment
// request. It must check that req asks for no more than the price the
// caller agreed to before paying (the caller passes the most it will pay).
type Handler interface {
	PMI() string
	// Pay pays req, which must not cost more than maxAmount (in the unit
	// of the request), and returns what proves the payment, if anything.
	Pay(ctx context.Context, req PaymentRequired, maxAmount int64) (Receipt, error)
}

// Receipt is what a handler knows of a payment it made.
type Receipt struct {
	Amount   int64
	PMI      string
	Preimage string // Lightning: the preimage, hex
	PaidAt   time.Time
}

// GuessPMI names the payment method of a payment request given without
// one (seed 000's form of payment_required): BOLT11 invoices and the Fake
// method's requests; "" for any other. A rail whose requests can come that
// way adds its prefix here.
func GuessPMI(payReq string) string {
	low := strings.ToLower(payReq)
	switch {
	case strings.HasPrefix(low, "lnbc"), strings.HasPrefix(low, "lntb"), strings.HasPrefix(low, "lntbs"), strings.HasPrefix(low, "lnsb"):
		return PMILightningBolt11
	case strings.HasPrefix(low, "fake:"):
		return PMIFake
	}
	return ""
}
