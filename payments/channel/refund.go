package channel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/cvmgo/cvm/payments/bolt11"
)

// ErrNotPaid is what a Refunder's error wraps when the payment surely did
// not happen (the wallet refused it before sending): the refund may then be
// paid to another invoice. Any other error leaves the invoice recorded, to
// be paid again, never another: paying one BOLT11 invoice twice moves money
// once.
var ErrNotPaid = errors.New("channel: refund not paid")

// ErrRefundBusy is returned while the refund of the channel is being paid
// by another call.
var ErrRefundBusy = errors.New("channel: the refund is being paid; ask again shortly")

// Refunder pays a channel's refund from the server's wallet. Books call it
// for one channel at a time, after the invoice is recorded.
type Refunder interface {
	// PayRefund pays invoice, a BOLT11 invoice of amountMsat, and returns
	// its preimage (hex). Its error wraps ErrNotPaid when nothing was sent.
	// An invoice it paid before (a refund retried after a crash) must give
	// its preimage again, not an error.
	PayRefund(ctx context.Context, invoice string, amountMsat uint64) (preimage string, err error)
}

// Refund closes channel id of client if it is open, and pays what it owes
// to invoice, a BOLT11 invoice of exactly that amount made by the client's
// wallet, once: the invoice is recorded before it is paid, and a refund
// started before (restarts included) is completed with its own invoice,
// whatever invoice is given now. A paid refund returns the state.
func (b *Books) Refund(ctx context.Context, client []byte, id ID, invoice string) (State, error) {
	if b.opts.Refunder == nil {
		return State{}, errors.New("channel: these books have no Refunder")
	}
	if !b.startPaying(id) {
		return State{}, ErrRefundBusy
	}
	defer b.stopPaying(id)

	rec, err := b.recordRefund(ctx, client, id, invoice)
	if err != nil || rec.Refund == RefundPaid {
		return rec.State, err
	}
	preimage, payErr := b.opts.Refunder.PayRefund(ctx, rec.Invoice, rec.Owed)
	if payErr == nil {
		payErr = checkPreimage(rec.Invoice, preimage)
	}

	rec, unlock, err := b.lockLoad(ctx, client, id)
	if err != nil {
		return State{}, err
	}
	defer unlock()
	switch {
	case payErr == nil:
		rec.Refund, rec.Preimage = RefundPaid, preimage
		b.opts.Log.Info("channel refunded", "channel", id, "msat", rec.Owed)
	case errors.Is(payErr, ErrNotPaid):
		rec.Refund, rec.Invoice = RefundNone, ""
	default:
		return rec.State, fmt.Errorf("channel: refund of %s: %w (the same invoice is paid on the next attempt)", id, payErr)
	}
	if err := b.put(ctx, rec); err != nil {
		return State{}, err
	}
	if payErr != nil {
		return rec.State, fmt.Errorf("channel: refund of %s: %w", id, payErr)
	}
	return rec.State, nil
}

// recordRefund closes the channel and records the invoice its refund goes
// to, unless one is recorded already; nothing owed makes the refund paid.
func (b *Books) recordRefund(ctx context.Context, client []byte, id ID, invoice string) (*record, error) {
	rec, unlock, err := b.lockLoad(ctx, client, id)
	if err != nil {
		return &record{}, err
	}
	defer unlock()
	if !rec.Closed {
		b.close(rec, b.opts.Now())
	}
	switch {
	case rec.Refund != RefundNone:
		return rec, nil // paid, or pending with its invoice
	case rec.Owed == 0:
		rec.Refund = RefundPaid
	default:
		if err := b.checkInvoice(invoice, rec.Owed); err != nil {
			return rec, err
		}
		rec.Refund, rec.Invoice = RefundPending, invoice
	}
	if err := b.put(ctx, rec); err != nil {
		return &record{}, err
	}
	return rec, nil
}

func (b *Books) checkInvoice(invoice string, owed uint64) error {
	inv, err := bolt11.Decode(invoice)
	if err != nil {
		return fmt.Errorf("channel: refund invoice: %w", err)
	}
	if inv.Amount <= 0 || uint64(inv.Amount) != owed {
		return fmt.Errorf("channel: refund invoice asks %d msat, %d are owed", inv.Amount, owed)
	}
	if inv.Expired(b.opts.Now()) {
		return errors.New("channel: refund invoice has expired; make another")
	}
	return nil
}

func checkPreimage(invoice, preimage string) error {
	inv, err := bolt11.Decode(invoice)
	if err != nil {
		return err
	}
	p, err := hex.DecodeString(preimage)
	if err != nil || sha256.Sum256(p) != inv.Hash {
		return fmt.Errorf("channel: the wallet's preimage %.80q is not the invoice's", preimage)
	}
	return nil
}

func (b *Books) startPaying(id ID) bool {
	b.payingMu.Lock()
	defer b.payingMu.Unlock()
	if b.paying[id] {
		return false
	}
	b.paying[id] = true
	return true
}

func (b *Books) stopPaying(id ID) {
	b.payingMu.Lock()
	defer b.payingMu.Unlock()
	delete(b.paying, id)
}
