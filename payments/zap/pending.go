package zap

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// Durable spaces of the processor, keyed by payment hash.
const (
	pendingSpace = "zap.pending" // zaps asked for, until their invoice expires
	settledSpace = "zap.settled" // zaps whose receipt was read: the receipt's id
)

// keepAfter is how long a pending or settled zap is kept after its
// invoice expires: a request replayed after a restart (the server's
// freshness window) still finds it.
const keepAfter = time.Hour

// sinceSlack is how far before its zap request a payment's receipts are
// read: the LNURL server dates a receipt by its own clock.
const sinceSlack = 5 * 60

// pending is a zap asked for and not settled yet: what its receipt must
// say, and from when to read receipts.
type pending struct {
	Bolt11     string          `json:"bolt11"`
	Zapper     nostr.PubKey    `json:"zapper"`
	RequestID  nostr.ID        `json:"zap_request"`
	AmountMsat int64           `json:"amount_msat"`
	Since      nostr.Timestamp `json:"since"`
}

func (pd pending) expect() Expect {
	return Expect{Bolt11: pd.Bolt11, Zapper: pd.Zapper, RequestID: pd.RequestID, AmountMsat: pd.AmountMsat}
}

// record keeps pd in the store before its invoice leaves.
func (p *Processor) record(ctx context.Context, inv *bolt11.Invoice, pd pending) error {
	b, err := json.Marshal(pd)
	if err != nil {
		return err
	}
	if err := p.opts.Store.Put(ctx, pendingSpace, []byte(inv.PaymentHash()), b, inv.ExpiresAt().Add(keepAfter)); err != nil {
		return fmt.Errorf("zap: record the pending zap: %w", err)
	}
	return nil
}

// pending returns the pending zap of the invoice with hash.
func (p *Processor) pending(ctx context.Context, hash string) (pending, error) {
	b, ok, err := p.opts.Store.Get(ctx, pendingSpace, []byte(hash))
	if err != nil {
		return pending{}, fmt.Errorf("zap: read the pending zap: %w", err)
	}
	var pd pending
	if !ok || json.Unmarshal(b, &pd) != nil {
		return pending{}, fmt.Errorf("%w (payment hash %s)", ErrUnknown, hash)
	}
	return pd, nil
}

// settled reports whether the invoice with hash was settled already.
func (p *Processor) settled(ctx context.Context, hash string) bool {
	_, ok, err := p.opts.Store.Get(ctx, settledSpace, []byte(hash))
	return err == nil && ok
}

// markSettled records that receipt settled the invoice with hash.
func (p *Processor) markSettled(ctx context.Context, inv *bolt11.Invoice, hash string, receipt nostr.ID) {
	if err := p.opts.Store.Put(ctx, settledSpace, []byte(hash), []byte(receipt.Hex()), inv.ExpiresAt().Add(keepAfter)); err != nil {
		p.opts.Logger.Warn("zap: could not record a settled zap", "payment_hash", hash, "err", err)
	}
}

// waiter is a subscription to one payment's receipts.
type waiter struct {
	sub   *nostrx.Subscription
	once  sync.Once
	timer *time.Timer // closes a waiter no Verify took
}

func (w *waiter) close() {
	w.once.Do(func() {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.sub.Close()
	})
}

// subscribe opens the subscription to pd's receipts and waits until a
// relay has taken it: a receipt published from then on is read.
func (p *Processor) subscribe(ctx context.Context, pd pending) (*waiter, error) {
	sub := p.pool.Subscribe(nostr.Filter{
		Kinds: []nostr.Kind{KindReceipt}, Authors: []nostr.PubKey{pd.Zapper},
		Tags: nostr.TagMap{"p": {pd.Zapper.Hex()}}, Since: pd.Since,
	}, 0)
	t := time.NewTimer(p.opts.ReadyTimeout)
	defer t.Stop()
	select {
	case <-sub.Ready():
		return &waiter{sub: sub}, nil
	case <-t.C:
		sub.Close()
		return nil, fmt.Errorf("zap: no relay of %v took the subscription to zap receipts within %v", p.pool.Relays(), p.opts.ReadyTimeout)
	case <-ctx.Done():
		sub.Close()
		return nil, context.Cause(ctx)
	}
}

// keep holds w for the Verify of inv, closing it when inv expires if no
// Verify took it.
func (p *Processor) keep(inv *bolt11.Invoice, w *waiter) {
	hash := inv.PaymentHash()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting[hash] = w
	w.timer = time.AfterFunc(time.Until(inv.ExpiresAt()), func() {
		if p.take(hash) == w {
			w.close()
		}
	})
}

// take returns the subscription Require opened for the invoice with
// hash, if it is still held.
func (p *Processor) take(hash string) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.waiting[hash]
	delete(p.waiting, hash)
	if w != nil && w.timer != nil {
		w.timer.Stop()
	}
	return w
}
