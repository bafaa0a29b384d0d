package channel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

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
// whatever invoice is given now. A paid refund returns the state. One call
// pays at a time, across the processes sharing the store too: another gets
// ErrRefundBusy meanwhile.
func (b *Books) Refund(ctx context.Context, client []byte, id ID, invoice string) (State, error) {
	if b.opts.Refunder == nil {
		return State{}, errors.New("channel: these books have no Refunder")
	}
	done, err := b.startPaying(ctx, id)
	if err != nil {
		return State{}, err
	}
	defer done()

	rec, err := b.recordRefund(ctx, client, id, invoice)
	if err != nil || rec.Refund == RefundPaid {
		return rec.State, err
	}
	paid := rec.Invoice
	preimage, payErr := b.opts.Refunder.PayRefund(ctx, paid, rec.Owed)
	if payErr == nil {
		payErr = checkPreimage(paid, preimage)
	}
	if payErr != nil && !errors.Is(payErr, ErrNotPaid) {
		return rec.State, fmt.Errorf("channel: refund of %s: %w (the same invoice is paid on the next attempt)", id, payErr)
	}
	// What the payment settled is recorded over the pending refund of that
	// invoice only: a change made meanwhile is kept.
	refunded := false
	rec, err = b.change(ctx, client, id, func(rec *record) (bool, error) {
		refunded = false
		if rec.Refund != RefundPending || rec.Invoice != paid {
			return false, nil
		}
		if payErr == nil {
			rec.Refund, rec.Preimage, refunded = RefundPaid, preimage, true
		} else {
			rec.Refund, rec.Invoice = RefundNone, ""
		}
		return true, nil
	})
	switch {
	case err != nil:
		return State{}, err
	case payErr != nil:
		return rec.State, fmt.Errorf("channel: refund of %s: %w", id, payErr)
	case refunded:
		b.opts.Log.Info("channel refunded", "channel", id, "msat", rec.Owed)
	}
	return rec.State, nil
}

// recordRefund closes the channel and records the invoice its refund goes
// to, unless one is recorded already; nothing owed makes the refund paid.
func (b *Books) recordRefund(ctx context.Context, client []byte, id ID, invoice string) (*record, error) {
	rec, err := b.change(ctx, client, id, func(rec *record) (bool, error) {
		if !rec.Closed {
			b.close(rec, b.opts.Now())
		}
		switch {
		case rec.Refund != RefundNone:
			return false, nil // paid, or pending with its invoice
		case rec.Owed == 0:
			rec.Refund = RefundPaid
		default:
			if err := b.checkInvoice(invoice, rec.Owed); err != nil {
				return false, err
			}
			rec.Refund, rec.Invoice = RefundPending, invoice
		}
		return true, nil
	})
	if rec == nil {
		rec = &record{}
	}
	return rec, err
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

// payingLease bounds how long a refund's payment holds its channel in a
// shared store: a process that dies paying leaves the next attempt to wait
// that long (then it pays the recorded invoice again, which moves no money
// twice).
const payingLease = 5 * time.Minute

// payingSpace holds, by channel id, the token of the process paying the
// channel's refund now; an empty value when none is.
const payingSpace = "channel-paying"

// startPaying marks the refund of id as being paid by this call, or fails
// with ErrRefundBusy when another call pays it: one of this process, or,
// in a shared store (a Swapper), of any process. done unmarks it.
func (b *Books) startPaying(ctx context.Context, id ID) (done func(), err error) {
	b.payingMu.Lock()
	busy := b.paying[id]
	b.paying[id] = true
	b.payingMu.Unlock()
	if busy {
		return nil, ErrRefundBusy
	}
	local := func() {
		b.payingMu.Lock()
		delete(b.paying, id)
		b.payingMu.Unlock()
	}
	if b.swapper == nil {
		return local, nil
	}
	v, held, err := b.swapper.Get(ctx, payingSpace, id[:])
	if err == nil && held && len(v) > 0 {
		err = ErrRefundBusy
	}
	var old []byte // none: nil; released: empty, not nil
	if held {
		old = []byte{}
	}
	token := make([]byte, 16)
	rand.Read(token)
	if err == nil {
		if ok, serr := b.swapper.Swap(ctx, payingSpace, id[:], old, token, b.opts.Now().Add(payingLease)); serr != nil {
			err = fmt.Errorf("channel: mark the refund of %s paid: %w", id, serr)
		} else if !ok {
			err = ErrRefundBusy
		}
	}
	if err != nil {
		local()
		return nil, err
	}
	return func() {
		// Released even when the request's context has ended.
		ctx := context.WithoutCancel(ctx)
		if _, err := b.swapper.Swap(ctx, payingSpace, id[:], token, []byte{}, b.opts.Now().Add(payingLease)); err != nil {
			b.opts.Log.Warn("channel refund: could not release its mark; the next attempt waits for it to expire",
				"channel", id, "err", err)
		}
		local()
	}, nil
}
