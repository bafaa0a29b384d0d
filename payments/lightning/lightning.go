package lightning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/zap"
)

// Reasons a payment is refused or fails; errors wrap one of them.
var (
	ErrInvalidInvoice = errors.New("lightning: invalid invoice")
	ErrNoAmount       = errors.New("lightning: the invoice has no amount")
	ErrAmountMismatch = errors.New("lightning: the invoice's amount is not the price asked")
	ErrTooExpensive   = errors.New("lightning: the price is above the most the caller will pay")
	ErrExpired        = errors.New("lightning: the invoice has expired")
	ErrBadPreimage    = errors.New("lightning: the wallet's preimage does not match the payment hash")
	ErrUnit           = errors.New("lightning: prices must be in sats")
)

// DefaultTTL is how long an invoice of the Processor can be paid.
const DefaultTTL = 300 * time.Second

// Unit is the unit of Lightning prices.
const Unit = "sats"

const maxSats = bolt11.MaxAmountMsat / 1000

// ProcessorOptions configure a Processor. Zero values take the defaults.
type ProcessorOptions struct {
	// TTL is how long an invoice can be paid (default DefaultTTL).
	TTL time.Duration
	// PollMin and PollMax bound the interval between two lookups while
	// verifying (default 0.5 s and 15 s; it doubles each time).
	PollMin, PollMax time.Duration
	// NotifiedPollMin is the first interval between lookups when the
	// wallet announces payments (a Notifier): lookups are then only the
	// safety net for a notification lost on the way (default 3 s; it
	// doubles up to PollMax).
	NotifiedPollMin time.Duration
	// PollOnly verifies by lookups even when the wallet announces
	// payments.
	PollOnly bool
	// Prepared is how many invoices the processor keeps made ahead for
	// each price it was asked for (amount and description), so that a
	// request's payment request does not wait for the wallet to make one
	// (default 1; negative: none, each invoice made when asked). One made
	// ahead is handed out while nine tenths of its TTL remain; the others
	// expire unpaid in the wallet. Close stops the making.
	Prepared int
	// Now is the clock that decides expiry (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Processor issues Lightning invoices through a wallet and verifies their
// payment: on the wallet's notification, when it sends them, and by
// looking the invoice up.
type Processor struct {
	w        payments.Wallet
	notifier Notifier // nil: lookups only
	opts     ProcessorOptions
	listened listened
	prep     prepared // invoices made ahead (prepare.go)
}

var (
	_ payments.Processor = (*Processor)(nil)
	_ payments.Checker   = (*Processor)(nil)
)

// NewProcessor returns a processor that receives into w.
func NewProcessor(w payments.Wallet, opts ProcessorOptions) *Processor {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.PollMin <= 0 {
		opts.PollMin = 500 * time.Millisecond
	}
	if opts.PollMax <= 0 {
		opts.PollMax = 15 * time.Second
	}
	if opts.NotifiedPollMin <= 0 {
		opts.NotifiedPollMin = 3 * time.Second
	}
	if opts.Prepared == 0 {
		opts.Prepared = 1
	}
	opts.PollMax = max(opts.PollMax, opts.PollMin)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Processor{w: w, opts: opts}
	if n, ok := w.(Notifier); ok && !opts.PollOnly {
		p.notifier = n
	}
	return p
}

// PMI implements payments.Processor.
func (p *Processor) PMI() string { return payments.PMILightningBolt11 }

func checkSats(amount int64, unit string) error {
	if unit != "" && unit != Unit {
		return fmt.Errorf("%w, not %q", ErrUnit, unit)
	}
	if amount <= 0 || amount > maxSats {
		return fmt.Errorf("lightning: amount %d sats is out of range", amount)
	}
	return nil
}

// Require makes an invoice for c.Amount sats. With a wallet that
// announces payments, it listens for them first: the invoice leaves only
// once a payment of it will be heard.
func (p *Processor) Require(ctx context.Context, c payments.Charge) (payments.PaymentRequired, error) {
	if err := checkSats(c.Amount, c.Unit); err != nil {
		return payments.PaymentRequired{}, err
	}
	listening := p.listen(ctx)
	k := priceKey{c.Amount * 1000, c.Description}
	inv, ok := p.take(k)
	if !ok {
		var err error
		if inv, err = p.w.MakeInvoice(ctx, k.msat, k.description, p.opts.TTL); err != nil {
			return payments.PaymentRequired{}, fmt.Errorf("lightning: make invoice: %w", err)
		}
	}
	p.prepare(k) // for the next request at this price
	// The wallet's answer names the invoice's hash and expiry: decoding
	// the invoice (a signature's public key recovered, half a
	// millisecond) only when it does not.
	hash, expires := inv.PaymentHash, inv.ExpiresAt
	if hash == "" || expires.IsZero() {
		if dec, err := bolt11.Decode(inv.Bolt11); err == nil {
			hash, expires = dec.PaymentHash(), dec.ExpiresAt()
		}
	}
	if hash != "" && listening {
		p.listened.add(hash, expires)
	}
	ttl := p.opts.TTL
	if ok && !expires.IsZero() { // made ahead: what is left of it
		ttl = min(ttl, expires.Sub(p.opts.Now()))
	}
	return payments.PaymentRequired{
		Amount: c.Amount, PayReq: inv.Bolt11, PMI: payments.PMILightningBolt11,
		Description: c.Description, TTL: int64(ttl / time.Second),
	}, nil
}

// transient reports whether a lookup error is worth another try.
func transient(err error) bool {
	var we *payments.WalletError
	if errors.As(err, &we) {
		switch we.Code {
		case payments.CodeNotFound, payments.CodeRateLimited, payments.CodeInternal:
			return true
		}
		return false
	}
	return true // no answer, a relay hiccup: the wallet may answer next time
}

// Verify waits until the invoice of req is settled (nil), has expired
// (ErrExpired) or ctx ends (ctx's error): on the wallet's notification of
// the payment, if it sends them, and by lookups, which back off from
// PollMin (NotifiedPollMin with notifications) to PollMax. NOT_FOUND
// counts as not paid yet. When ctx's deadline or the invoice's expiry
// ends the wait, it looks once more before it gives the invoice up; still
// unpaid and expired, the invoice is ErrExpired even when the deadline
// ended the wait (a caller that bounds the wait by the invoice's ttl
// reaches both at once).
func (p *Processor) Verify(ctx context.Context, _ payments.Charge, req payments.PaymentRequired) error {
	inv, err := bolt11.Decode(req.PayReq)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInvoice, err)
	}
	hash := inv.PaymentHash()
	delay, wait := p.opts.PollMin, time.Duration(0)
	var heard <-chan notice
	if p.notifier != nil {
		// The first wait for an invoice made while listening skips the
		// first lookup: it could only find the invoice unpaid, as the
		// payer has just been told of it. Any other (after a restart,
		// or after a wait that ended early) looks at once.
		first := p.listened.first(hash)
		if first || p.listen(ctx) {
			h, stop := p.await(ctx, hash)
			defer stop()
			heard, delay = h, p.opts.NotifiedPollMin
			if first {
				wait = delay
			}
		}
	}
	for {
		if ctx.Err() != nil {
			return p.giveUp(ctx, req, inv)
		}
		now := p.opts.Now()
		// Look right at expiry rather than long after it.
		t := time.NewTimer(max(0, min(wait, inv.ExpiresAt().Sub(now))))
		select {
		case <-t.C:
		case n := <-heard:
			t.Stop()
			heard = nil // one notice per payment hash; lookups from now on
			if n.err != nil {
				// No longer listening (the wallet connection's pool
				// closed): look up as if it never announced payments.
				wait, delay = 0, p.opts.PollMin
				continue
			}
			if err := settled(n.inv, inv, hash, true); err != nil {
				p.opts.Logger.Warn("lightning: the wallet's notification of a payment does not settle it; looking it up", "payment_hash", hash, "err", err)
				continue
			}
			p.opts.Logger.Debug("lightning: payment settled by the wallet's notification", "payment_hash", hash)
			return nil
		case <-ctx.Done():
			t.Stop()
			return p.giveUp(ctx, req, inv)
		}
		got, err := p.w.LookupInvoice(ctx, hash)
		switch {
		case err == nil && got.Settled():
			if err := settled(got, inv, hash, false); err != nil {
				return err
			}
			p.opts.Logger.Debug("lightning: payment settled by lookup", "payment_hash", hash)
			return nil
		case err != nil && ctx.Err() != nil:
			return p.giveUp(ctx, req, inv)
		case err != nil && !transient(err):
			return fmt.Errorf("lightning: lookup invoice: %w", err)
		case err != nil:
			p.opts.Logger.Debug("lightning: invoice not found yet", "payment_hash", hash, "err", err)
		}
		if inv.Expired(p.opts.Now()) {
			return expired(inv)
		}
		wait, delay = delay, min(delay*2, p.opts.PollMax)
	}
}

// finalLook bounds the last lookup of an invoice whose wait ran out.
const finalLook = 5 * time.Second

// giveUp ends a wait that ctx ended. If its deadline did (the wait ran
// out, rather than being called off), the invoice is looked up once more,
// so that a payment made at the last moment, whose notification was lost,
// is still credited. Unpaid, an invoice that had expired before that
// look is ErrExpired, not the deadline: a wait bounded by the invoice's
// ttl has its deadline at the expiry, which may fire before the expiry's
// own look, or during it when the wallet is slow to answer. The clock is
// read before the look, so that "unpaid" is the wallet's word after the
// expiry.
func (p *Processor) giveUp(ctx context.Context, req payments.PaymentRequired, inv *bolt11.Invoice) error {
	cause := context.Cause(ctx)
	if !errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Errorf("lightning: verify: %w", cause)
	}
	gone := inv.Expired(p.opts.Now())
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalLook)
	defer cancel()
	if paid, err := p.paid(lctx, req, true); err == nil && paid {
		return nil
	}
	if gone {
		return expired(inv)
	}
	return fmt.Errorf("lightning: verify: %w", cause)
}

// expired is the error of an invoice that expired unpaid.
func expired(inv *bolt11.Invoice) error {
	return fmt.Errorf("%w: unpaid at %s", ErrExpired, inv.ExpiresAt().UTC().Format(time.RFC3339))
}

// settled checks what the wallet says of a settled invoice against the
// invoice asked for: the same payment hash, an amount no less than it
// asks (a notification must name one), and a preimage that hashes to it
// if it names one.
func settled(got payments.Invoice, inv *bolt11.Invoice, hash string, notice bool) error {
	switch {
	case got.PaymentHash != "" && got.PaymentHash != hash:
		return fmt.Errorf("lightning: the wallet answered of payment hash %s, not %s", got.PaymentHash, hash)
	case (got.AmountMsat != 0 || notice) && got.AmountMsat < inv.AmountMsat():
		return fmt.Errorf("lightning: invoice settled for %d msat, less than the %d asked", got.AmountMsat, inv.AmountMsat())
	case got.Preimage != "" && !preimageMatches(got.Preimage, hash):
		return ErrBadPreimage
	}
	return nil
}

// Paid looks up the invoice of req once and reports whether it is settled
// (payments.Checker); Verify checks the amount and the preimage.
func (p *Processor) Paid(ctx context.Context, _ payments.Charge, req payments.PaymentRequired) (bool, error) {
	return p.paid(ctx, req, false)
}

// paid looks the invoice of req up once; checked, it also checks what
// the wallet says of a settled one (see settled).
func (p *Processor) paid(ctx context.Context, req payments.PaymentRequired, checked bool) (bool, error) {
	inv, err := bolt11.Decode(req.PayReq)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidInvoice, err)
	}
	got, err := p.w.LookupInvoice(ctx, inv.PaymentHash())
	var we *payments.WalletError
	switch {
	case errors.As(err, &we) && we.Code == payments.CodeNotFound:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lightning: lookup invoice: %w", err)
	case checked && got.Settled():
		if err := settled(got, inv, inv.PaymentHash(), false); err != nil {
			return false, err
		}
	}
	return got.Settled(), nil
}

func preimageMatches(preimage, hash string) bool {
	b, err := hex.DecodeString(preimage)
	if err != nil || len(b) != 32 {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == hash
}

// Handler pays Lightning payment requests through a wallet.
type Handler struct {
	w payments.Wallet
	// Now is the clock that decides expiry (default time.Now).
	Now func() time.Time
	// Logger notes a zap invoice paid without its zap request to check
	// (default: discarded).
	Logger *slog.Logger
}

var _ payments.Handler = (*Handler)(nil)

// NewHandler returns a handler that pays from w.
func NewHandler(w payments.Wallet) *Handler { return &Handler{w: w, Now: time.Now} }

// PMI implements payments.Handler.
func (h *Handler) PMI() string { return payments.PMILightningBolt11 }

// Check reads req's invoice and returns it if paying it is acceptable:
// a well-formed invoice (its signature is the wallet's to check), not expired, for exactly req.Amount sats, which is at
// most maxAmount.
func (h *Handler) Check(req payments.PaymentRequired, maxAmount int64) (*bolt11.Invoice, error) {
	if req.PMI != payments.PMILightningBolt11 {
		return nil, fmt.Errorf("lightning: cannot pay a %q request", req.PMI)
	}
	// Read, not verified: the wallet verifies the invoice's signature
	// before it pays, and recovering the payee's key here would cost half
	// a millisecond of every paid call's critical path.
	inv, err := bolt11.Parse(req.PayReq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInvoice, err)
	}
	msat := inv.AmountMsat()
	switch {
	case msat == 0:
		return nil, ErrNoAmount
	case req.Amount <= 0 || req.Amount > maxSats || msat != req.Amount*1000:
		return nil, fmt.Errorf("%w: the invoice asks %d msat, the request says %d sats", ErrAmountMismatch, msat, req.Amount)
	case req.Amount > maxAmount:
		return nil, fmt.Errorf("%w: %d sats asked, at most %d allowed", ErrTooExpensive, req.Amount, maxAmount)
	case inv.Expired(h.now()):
		return nil, fmt.Errorf("%w at %s", ErrExpired, inv.ExpiresAt().UTC().Format(time.RFC3339))
	}
	// A zap invoice (NIP-57) commits to its zap request: when the server
	// shows it, it must be for this price and hash to the invoice's
	// description hash. The reference shows none.
	checked, err := zap.CheckMeta(req, inv)
	if err != nil {
		return nil, err
	}
	if !checked && zap.IsZap(req) && h.Logger != nil {
		h.Logger.Info("lightning: paying a zap invoice without its zap request to check against it", "amount", req.Amount)
	}
	return inv, nil
}

func (h *Handler) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

// Pay pays req if Check accepts it, and returns the receipt with the
// preimage. If the wallet reports a payment whose preimage does not hash
// to the payment hash, Pay returns the receipt and an error wrapping
// ErrBadPreimage: the money may be gone, but there is no proof.
func (h *Handler) Pay(ctx context.Context, req payments.PaymentRequired, maxAmount int64) (payments.Receipt, error) {
	inv, err := h.Check(req, maxAmount)
	if err != nil {
		return payments.Receipt{}, err
	}
	preimage, err := h.w.PayInvoice(ctx, req.PayReq)
	if err != nil {
		return payments.Receipt{}, fmt.Errorf("lightning: pay invoice: %w", err)
	}
	r := payments.Receipt{Amount: req.Amount, PMI: payments.PMILightningBolt11, Preimage: preimage, PaidAt: h.now()}
	if !preimageMatches(preimage, inv.PaymentHash()) {
		return r, ErrBadPreimage
	}
	return r, nil
}
