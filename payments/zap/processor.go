package zap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// Options configure a Processor. Address, Key, Relays and Store are
// required; zero values of the others take the defaults beside them.
type Options struct {
	// Address is the Lightning address paid.
	Address Address
	// Key signs the zap requests: the server's own key, so that whoever
	// reads a receipt sees which server asked for the payment.
	Key nostr.SecretKey
	// Relays are named in each zap request, for the receipt, and watched
	// for it.
	Relays []string
	// Store keeps each pending zap until its invoice expires (the
	// server's State), so that a restarted server still reads its
	// receipt.
	Store durable.Store
	// Fetcher fetches the LNURL-pay parameters and invoices (default
	// outbound.New with its defaults: public addresses only).
	Fetcher *outbound.Fetcher
	// ParamsTTL is how long the address's LNURL-pay parameters are used
	// before they are fetched again (default 1 min; negative: fetched for
	// every payment request). Invoices are always fetched per request.
	ParamsTTL time.Duration
	// ReadyTimeout bounds the wait for a relay to take the subscription
	// to a payment's receipts, before its invoice is handed out (default
	// 10 s).
	ReadyTimeout time.Duration
	// ExpiryGrace is how long, once an invoice has expired, the processor
	// still waits for the relays' stored receipts before it gives the
	// payment up (default 5 s).
	ExpiryGrace time.Duration
	Logger      *slog.Logger
}

// Processor asks for payments as zaps to a Lightning address and settles
// them on their zap receipts (NIP-57), with no wallet connection. It is a
// payments.Processor of PMI "bitcoin-lightning-bolt11": its payment
// requests are BOLT11 invoices any Lightning wallet pays. Close releases
// its relay connections.
type Processor struct {
	opts Options
	pool *nostrx.Pool

	mu       sync.Mutex
	params   PayParams
	paramsAt time.Time
	waiting  map[string]*waiter // by payment hash: subscribed by Require, taken by Verify
}

var _ payments.Processor = (*Processor)(nil)

// NewProcessor returns a processor for opts, connecting to its relays.
func NewProcessor(opts Options) (*Processor, error) {
	switch {
	case opts.Address.Name == "" || opts.Address.Host == "":
		return nil, fmt.Errorf("%w: none given", ErrAddress)
	case len(opts.Relays) == 0:
		return nil, errors.New("zap: relays are required, for the receipts")
	case opts.Store == nil:
		return nil, errors.New("zap: a durable store is required, for pending zaps")
	case opts.Key == nostr.SecretKey{}:
		return nil, errors.New("zap: a key is required, to sign zap requests")
	}
	// The zap request names them for the LNURL server to publish to:
	// whole URLs, as the pool dials them.
	relays := make([]string, 0, len(opts.Relays))
	for _, u := range opts.Relays {
		if u = nostrx.NormalizeRelayURL(u); u != "" {
			relays = append(relays, u)
		}
	}
	opts.Relays = relays
	if opts.Fetcher == nil {
		opts.Fetcher = outbound.New(outbound.Options{})
	}
	if opts.ParamsTTL == 0 {
		opts.ParamsTTL = time.Minute
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	if opts.ExpiryGrace <= 0 {
		opts.ExpiryGrace = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: opts.Relays, Logger: opts.Logger})
	return &Processor{opts: opts, pool: pool, waiting: map[string]*waiter{}}, nil
}

// PMI implements payments.Processor.
func (p *Processor) PMI() string { return payments.PMILightningBolt11 }

// Close stops every wait and closes the relay connections.
func (p *Processor) Close() error {
	p.mu.Lock()
	for h, w := range p.waiting {
		w.close()
		delete(p.waiting, h)
	}
	p.mu.Unlock()
	return p.pool.Close()
}

// payParams returns the address's LNURL-pay parameters, fetched again
// once they are older than ParamsTTL.
func (p *Processor) payParams(ctx context.Context) (PayParams, error) {
	p.mu.Lock()
	cached, at := p.params, p.paramsAt
	p.mu.Unlock()
	if p.opts.ParamsTTL > 0 && !at.IsZero() && time.Since(at) < p.opts.ParamsTTL {
		return cached, nil
	}
	params, err := FetchPayParams(ctx, p.opts.Fetcher, p.opts.Address)
	if err != nil {
		return PayParams{}, err
	}
	p.mu.Lock()
	p.params, p.paramsAt = params, time.Now()
	p.mu.Unlock()
	return params, nil
}

// Require asks the Lightning address for an invoice of c.Amount sats
// bound to a zap request the server signs, records the pending zap, and
// subscribes for its receipt: the invoice leaves only once a receipt of
// it will be read.
func (p *Processor) Require(ctx context.Context, c payments.Charge) (payments.PaymentRequired, error) {
	if c.Unit != "" && c.Unit != "sats" {
		return payments.PaymentRequired{}, fmt.Errorf("zap: prices must be in sats, not %q", c.Unit)
	}
	if c.Amount <= 0 || c.Amount > bolt11.MaxAmountMsat/1000 {
		return payments.PaymentRequired{}, fmt.Errorf("zap: amount %d sats is out of range", c.Amount)
	}
	amount := c.Amount * 1000
	params, err := p.payParams(ctx)
	if err != nil {
		return payments.PaymentRequired{}, err
	}
	if amount < params.MinSendable || amount > params.MaxSendable {
		return payments.PaymentRequired{}, fmt.Errorf("%w: %s takes %d to %d msat, not %d", ErrPayParams, p.opts.Address, params.MinSendable, params.MaxSendable, amount)
	}
	zr := NewRequest(amount, params.NostrPubkey, p.opts.Relays, nostr.Now())
	if err := zr.Sign(p.opts.Key); err != nil {
		return payments.PaymentRequired{}, fmt.Errorf("zap: sign the zap request: %w", err)
	}
	zrJSON, err := json.Marshal(zr)
	if err != nil {
		return payments.PaymentRequired{}, err
	}
	inv, pr, err := FetchInvoice(ctx, p.opts.Fetcher, params, amount, string(zrJSON))
	if err != nil {
		return payments.PaymentRequired{}, fmt.Errorf("%s: %w", p.opts.Address, err)
	}
	pend := pending{Bolt11: pr, Zapper: params.NostrPubkey, RequestID: zr.ID, AmountMsat: amount, Since: zr.CreatedAt - sinceSlack}
	if err := p.record(ctx, inv, pend); err != nil {
		return payments.PaymentRequired{}, err
	}
	w, err := p.subscribe(ctx, pend)
	if err != nil {
		return payments.PaymentRequired{}, err
	}
	p.keep(inv, w)
	return payments.PaymentRequired{
		Amount: c.Amount, PayReq: pr, PMI: payments.PMILightningBolt11, Description: c.Description,
		TTL: max(1, int64(time.Until(inv.ExpiresAt())/time.Second)), Meta: newMeta(string(zrJSON)),
	}, nil
}

// Verify waits until the zap receipt of req's invoice is read and settles
// it (nil), the invoice has expired (ErrExpired) or ctx ends. A receipt
// that does not settle it (another signer, invoice, zap request or
// amount) is logged and skipped. An invoice this processor has no pending
// zap for is never settled (ErrUnknown).
func (p *Processor) Verify(ctx context.Context, c payments.Charge, req payments.PaymentRequired) error {
	inv, err := bolt11.Parse(req.PayReq)
	if err != nil {
		return fmt.Errorf("zap: %w", err)
	}
	hash := inv.PaymentHash()
	if p.settled(ctx, hash) {
		return nil
	}
	pend, err := p.pending(ctx, hash)
	if err != nil {
		return err
	}
	if pend.Bolt11 != req.PayReq || (c.Amount != 0 && c.Amount*1000 != pend.AmountMsat) {
		return fmt.Errorf("%w: the payment request is not the one issued", ErrUnknown)
	}
	w := p.take(hash)
	if w == nil { // issued before a restart: read the receipts since then
		p.opts.Logger.Info("zap: waiting again for the receipt of a zap asked for before a restart", "payment_hash", hash, "since", pend.Since)
		if w, err = p.subscribe(ctx, pend); err != nil {
			return err
		}
	}
	defer w.close()
	return p.await(ctx, inv, hash, pend, w)
}

// await reads receipts from w until one settles pend.
func (p *Processor) await(ctx context.Context, inv *bolt11.Invoice, hash string, pend pending, w *waiter) error {
	expect := pend.expect()
	expiry := time.NewTimer(time.Until(inv.ExpiresAt()))
	defer expiry.Stop()
	var grace <-chan time.Time
	for {
		select {
		case evt, ok := <-w.sub.Events():
			if !ok {
				return errors.New("zap: stopped waiting for the receipt: the relay connections closed")
			}
			if err := expect.Check(evt); err != nil {
				p.opts.Logger.Warn("zap: a receipt that settles nothing", "payment_hash", hash, "receipt", evt.ID.Hex(), "err", err)
				continue
			}
			p.markSettled(ctx, inv, hash, evt.ID)
			p.opts.Logger.Debug("zap: payment settled by its zap receipt", "payment_hash", hash, "receipt", evt.ID.Hex())
			return nil
		case <-expiry.C:
			// The relays may still be replaying stored receipts (after a
			// restart): wait for all of them, within the grace.
			g := time.NewTimer(p.opts.ExpiryGrace)
			defer g.Stop()
			grace = g.C
			select {
			case <-w.sub.Complete():
				grace = closed
			default:
			}
		case <-grace:
			return fmt.Errorf("%w at %s", ErrExpired, inv.ExpiresAt().UTC().Format(time.RFC3339))
		case <-ctx.Done():
			return fmt.Errorf("zap: verify: %w", context.Cause(ctx))
		}
	}
}

// closed is a channel that is ready at once.
var closed = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()
