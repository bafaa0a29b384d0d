package wallet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

// recoverPending finishes the operations a crash (or a lost answer) left
// pending in the proof file, before anything new is done at the mint.
// Only a process holding the file's lock gets here, and an operation is
// pending only while its process holds the lock, so every one found was
// interrupted.
//
// A swap is sent again, the same inputs for the same outputs: if the
// first never reached the mint, this one does its work. A mint quote is
// looked up: once paid, its outputs are minted; unpaid and expired, it is
// dropped (nothing was paid for it).
//
// What cannot be recovered: a swap or a mint the mint carried out whose
// answer was lost (the crash fell between the mint's signing and the
// file's next write, the length of one HTTP answer). The inputs are spent
// and the signatures are known only to the mint: getting them back takes
// NUT-09 restore, which cvm mint-sim does not offer. Such an operation is
// dropped with a warning that names its amount.
func (o *op) recoverPending(ctx context.Context) error {
	for _, p := range append([]pendingOp(nil), o.ss.f.Pending...) {
		outputs, err := loadOutputs(p.Outputs)
		if err != nil {
			return err
		}
		switch p.Kind {
		case opSwap:
			err = o.recoverSwap(ctx, p, outputs)
		case opMint:
			err = o.recoverMint(ctx, p, outputs)
		default:
			err = fmt.Errorf("cashu wallet: pending operation of unknown kind %q", p.Kind)
		}
		if err != nil {
			return fmt.Errorf("finishing a %s interrupted at %s: %w", p.Kind, p.Started.Format("2006-01-02 15:04:05Z"), err)
		}
	}
	return nil
}

func (o *op) recoverSwap(ctx context.Context, p pendingOp, outputs []cashu.Output) error {
	resp, err := o.c.Swap(ctx, cashu.SwapRequest{Inputs: p.Inputs, Outputs: cashu.Messages(outputs)})
	var me *cashu.Error
	switch {
	case err == nil:
		proofs, err := o.keys.unblind(ctx, outputs, resp.Signatures)
		if err != nil {
			return err
		}
		o.w.log.Info("cashu wallet: finished an interrupted swap", "mint", o.c.URL(), "sats", p.amount())
		return o.settle(p, proofs)
	case !errors.As(err, &me):
		return err // the mint is unreachable: try again later
	case me.Code == cashu.CodeOutputsSigned:
		o.w.log.Warn("cashu wallet: a swap interrupted by a crash was carried out by the mint, whose answer was lost; its proofs cannot be recovered without NUT-09 restore",
			"mint", o.c.URL(), "sats", p.amount())
		o.drop(p)
		return o.ss.save()
	}
	// Refused: it did not happen, now or before; our inputs come back
	// unless spent (a token sent from them).
	err = o.swapFailed(ctx, p, err)
	if errors.Is(err, ErrSpent) || errors.As(err, &me) {
		o.w.log.Warn("cashu wallet: an interrupted swap was refused by the mint and dropped", "mint", o.c.URL(), "sats", p.amount(), "err", me)
		return nil
	}
	return err
}

func (o *op) recoverMint(ctx context.Context, p pendingOp, outputs []cashu.Output) error {
	q, err := o.c.MintQuoteState(ctx, p.Quote)
	if err != nil {
		var me *cashu.Error
		if errors.As(err, &me) { // the mint knows no such quote
			o.drop(p)
			return o.ss.save()
		}
		return err
	}
	switch q.State {
	case cashu.QuotePaid:
		if err := o.finishMint(ctx, p, outputs); err != nil {
			return err
		}
		o.w.log.Info("cashu wallet: minted a quote paid before a crash", "mint", o.c.URL(), "sats", p.amount())
		return nil
	case cashu.QuoteIssued:
		o.w.log.Warn("cashu wallet: a mint interrupted by a crash was carried out by the mint, whose answer was lost; its proofs cannot be recovered without NUT-09 restore",
			"mint", o.c.URL(), "sats", p.amount())
	case cashu.QuoteUnpaid:
		if q.Expiry == nil || time.Now().Unix() < *q.Expiry {
			return nil // it may yet be paid: kept
		}
	}
	o.drop(p)
	return o.ss.save()
}
