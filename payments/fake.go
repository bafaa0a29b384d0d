package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/flockfile"
)

// The Fake payment method is for tests and demos only: no money moves.
// Its payment requests are "fake:<request id>:<client>:<amount>", as in
// the reference SDK's FakePaymentProcessor, and they are settled in a
// Ledger of made-up balances that FakeProcessor (the server) and
// FakeHandler (the client) share, so that a test can check that balances
// moved by exactly the price. Never use it where real money is meant.
const PMIFake = "fake"

// Errors of the fake rail.
var (
	ErrExpired    = errors.New("payment request expired")
	ErrNotPayable = errors.New("payment request not payable")
)

// ledgerLockTimeout bounds the wait for a file ledger's lock.
const ledgerLockTimeout = 5 * time.Second

// ledgerPoll is how often Verify looks at a file ledger, which other
// processes change.
const ledgerPoll = 20 * time.Millisecond

// Ledger is the made-up bank of the Fake payment method (test/demo only):
// balances by name and the payment requests issued. NewLedger keeps it in
// memory; OpenLedger keeps it in a file that several processes share
// (each operation one short transaction under a lock).
type Ledger struct {
	path string // "" in memory

	mu      sync.Mutex
	state   ledgerState   // in memory only
	changed chan struct{} // closed and replaced on every change, in memory
}

type ledgerState struct {
	Balances map[string]int64        `json:"balances"`
	Invoices map[string]*fakeInvoice `json:"invoices"`
}

type fakeInvoice struct {
	Payee   string    `json:"payee"`
	Amount  int64     `json:"amount"`
	Expires time.Time `json:"expires"`
	PaidBy  string    `json:"paid_by,omitempty"`
}

// NewLedger returns an in-memory ledger with the given opening balances.
func NewLedger(balances map[string]int64) *Ledger {
	l := &Ledger{changed: make(chan struct{}), state: ledgerState{Balances: map[string]int64{}, Invoices: map[string]*fakeInvoice{}}}
	for k, v := range balances {
		l.state.Balances[k] = v
	}
	return l
}

// OpenLedger returns the ledger kept in the file at path (created empty,
// mode 0600, if missing), shared with every process that opens it.
func OpenLedger(path string) *Ledger { return &Ledger{path: path} }

// update runs f on the ledger's state in one transaction; f's error leaves
// the state as it was.
func (l *Ledger) update(ctx context.Context, f func(s *ledgerState) error) error {
	if l.path == "" {
		// f changes nothing before it decides to succeed.
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := f(&l.state); err != nil {
			return err
		}
		close(l.changed)
		l.changed = make(chan struct{})
		return nil
	}
	return flockfile.Update(ctx, l.path, 0o600, ledgerLockTimeout, func(old []byte) ([]byte, error) {
		var s ledgerState
		if len(old) > 0 {
			if err := json.Unmarshal(old, &s); err != nil {
				return nil, fmt.Errorf("fake ledger %s: %w", l.path, err)
			}
		}
		if s.Balances == nil {
			s.Balances = map[string]int64{}
		}
		if s.Invoices == nil {
			s.Invoices = map[string]*fakeInvoice{}
		}
		if err := f(&s); err != nil {
			return nil, err
		}
		return json.Marshal(s)
	})
}

// Fund adds amount to name's balance.
func (l *Ledger) Fund(ctx context.Context, name string, amount int64) error {
	return l.update(ctx, func(s *ledgerState) error { s.Balances[name] += amount; return nil })
}

// Balance is name's balance.
func (l *Ledger) Balance(ctx context.Context, name string) (int64, error) {
	var b int64
	err := l.update(ctx, func(s *ledgerState) error { b = s.Balances[name]; return errUnchanged })
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return b, err
}

// errUnchanged ends a read-only transaction without writing.
var errUnchanged = errors.New("unchanged")

// issue records a payment request payable to payee; issuing one again
// keeps the first.
func (l *Ledger) issue(ctx context.Context, payReq, payee string, amount int64, expires time.Time) error {
	return l.update(ctx, func(s *ledgerState) error {
		if _, ok := s.Invoices[payReq]; !ok {
			s.Invoices[payReq] = &fakeInvoice{Payee: payee, Amount: amount, Expires: expires}
		}
		return nil
	})
}

// pay moves the amount of payReq from payer to its payee, once.
func (l *Ledger) pay(ctx context.Context, payer, payReq string, now time.Time) (int64, error) {
	var amount int64
	err := l.update(ctx, func(s *ledgerState) error {
		inv, ok := s.Invoices[payReq]
		switch {
		case !ok:
			return &WalletError{Code: CodeNotFound, Message: "no such payment request in the fake ledger"}
		case inv.PaidBy != "":
			return fmt.Errorf("%w: already paid", ErrNotPayable)
		case now.After(inv.Expires):
			return fmt.Errorf("%w: %w", ErrNotPayable, ErrExpired)
		case s.Balances[payer] < inv.Amount:
			return &WalletError{Code: CodeInsufficientBalance, Message: fmt.Sprintf("%s has %d, needs %d", payer, s.Balances[payer], inv.Amount)}
		}
		s.Balances[payer] -= inv.Amount
		s.Balances[inv.Payee] += inv.Amount
		inv.PaidBy = payer
		amount = inv.Amount
		return nil
	})
	return amount, err
}

// status reports whether payReq is paid, or expired.
func (l *Ledger) status(ctx context.Context, payReq string, now time.Time) (paid bool, expires time.Time, changed <-chan struct{}, err error) {
	err = l.update(ctx, func(s *ledgerState) error {
		inv, ok := s.Invoices[payReq]
		switch {
		case !ok:
			return &WalletError{Code: CodeNotFound, Message: "no such payment request in the fake ledger"}
		case inv.PaidBy != "":
			paid = true
		case now.After(inv.Expires):
			return ErrExpired
		}
		expires = inv.Expires
		changed = l.changed // nil for a file ledger
		return errUnchanged
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return paid, expires, changed, err
}

// FakeProcessor is the server side of the Fake payment method (test/demo
// only): it issues "fake:…" payment requests payable to Payee in Ledger.
type FakeProcessor struct {
	Ledger *Ledger
	Payee  string
	// TTL is how long a payment request may be paid (default 5 min).
	TTL time.Duration
}

// PMI is PMIFake.
func (p *FakeProcessor) PMI() string { return PMIFake }

func (p *FakeProcessor) ttl() time.Duration {
	if p.TTL <= 0 {
		return 5 * time.Minute
	}
	return p.TTL
}

// Require issues the payment request of c.
func (p *FakeProcessor) Require(ctx context.Context, c Charge) (PaymentRequired, error) {
	payReq := fmt.Sprintf("fake:%s:%s:%d", c.RequestID, c.Client, c.Amount)
	if err := p.Ledger.issue(ctx, payReq, p.Payee, c.Amount, time.Now().Add(p.ttl())); err != nil {
		return PaymentRequired{}, err
	}
	return PaymentRequired{Amount: c.Amount, PayReq: payReq, PMI: PMIFake, Description: c.Description,
		TTL: int64((p.ttl() + time.Second - 1) / time.Second)}, nil
}

// Verify waits until req is paid, expires or ctx ends.
func (p *FakeProcessor) Verify(ctx context.Context, c Charge, req PaymentRequired) error {
	var poll <-chan time.Time
	for {
		paid, expires, changed, err := p.Ledger.status(ctx, req.PayReq, time.Now())
		if err != nil || paid {
			return err
		}
		if changed == nil && poll == nil {
			t := time.NewTicker(ledgerPoll)
			defer t.Stop()
			poll = t.C
		}
		expiry := time.NewTimer(time.Until(expires) + time.Millisecond)
		select {
		case <-changed:
		case <-poll:
		case <-expiry.C:
		case <-ctx.Done():
			expiry.Stop()
			return fmt.Errorf("payment not verified: %w", context.Cause(ctx))
		}
		expiry.Stop()
	}
}

// Paid reports whether req is paid (Checker).
func (p *FakeProcessor) Paid(ctx context.Context, _ Charge, req PaymentRequired) (bool, error) {
	paid, _, _, err := p.Ledger.status(ctx, req.PayReq, time.Now())
	return paid, err
}

// FakeHandler is the client side of the Fake payment method (test/demo
// only): it pays from Payer's balance in Ledger.
type FakeHandler struct {
	Ledger *Ledger
	Payer  string
}

// PMI is PMIFake.
func (h *FakeHandler) PMI() string { return PMIFake }

// Pay pays req, refusing one whose amount differs from the request's own
// or exceeds maxAmount.
func (h *FakeHandler) Pay(ctx context.Context, req PaymentRequired, maxAmount int64) (Receipt, error) {
	amount, err := ParseFakePayReq(req.PayReq)
	if err != nil {
		return Receipt{}, err
	}
	if amount != req.Amount {
		return Receipt{}, fmt.Errorf("%w: the payment request is for %d, the price said %d", ErrNotPayable, amount, req.Amount)
	}
	if amount > maxAmount {
		return Receipt{}, fmt.Errorf("%w: %d is more than the %d agreed to", ErrNotPayable, amount, maxAmount)
	}
	paid, err := h.Ledger.pay(ctx, h.Payer, req.PayReq, time.Now())
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{Amount: paid, PMI: PMIFake, PaidAt: time.Now()}, nil
}

// ParseFakePayReq reads the amount of a "fake:<request>:<client>:<amount>"
// payment request.
func ParseFakePayReq(payReq string) (int64, error) {
	parts := strings.Split(payReq, ":")
	if len(parts) != 4 || parts[0] != "fake" {
		return 0, fmt.Errorf("%w: %q is not fake:<request>:<client>:<amount>", ErrNotPayable, payReq)
	}
	amount, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || amount < 0 {
		return 0, fmt.Errorf("%w: amount %q", ErrNotPayable, parts[3])
	}
	return amount, nil
}
