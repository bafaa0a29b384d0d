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
// A swap is sent again, the same inputs for the same outputs, and so is
// the mint request of a quote the mint says is paid or issued. If the
// first never reached the mint, the second does its work; if the mint
// carried it out and its answer was lost, a mint that answers a repeated
// request again (cvm mint-sim does: its signatures are deterministic and
// it records who claimed what; NUT-19 calls this cached responses) sends
// the same signatures, and nothing is lost. A mint that refuses the
// repeat (outputs already signed, quote already issued) leaves that one
// window open, the length of one HTTP answer: the inputs are spent, the
// signatures known only to the mint, and getting them back would take
// NUT-09 restore. Such an operation is dropped with a warning that names
// its amount. An unpaid quote is kept until it expires, then dropped
// (nothing was paid for it).
func (o *op) recoverPending(ctx context.Context) error {
	for _, p := range o.ss.state().pendingOps() {
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
		return o.lost(p)
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
			o.ss.finish(p)
			return o.ss.save()
		}
		return err
	}
	switch q.State {
	case cashu.QuotePaid, cashu.QuoteIssued:
		err := o.finishMint(ctx, p, outputs)
		var me *cashu.Error
		switch {
		case errors.Is(err, &cashu.Error{Code: cashu.CodeQuoteIssued}) || errors.Is(err, &cashu.Error{Code: cashu.CodeOutputsSigned}):
			return o.lost(p)
		case errors.As(err, &me):
			o.w.log.Warn("cashu wallet: the mint refused to mint a quote interrupted by a crash; dropped", "mint", o.c.URL(), "sats", p.amount(), "err", me)
			o.ss.finish(p)
			return o.ss.save()
		case err != nil:
			return err
		}
		o.w.log.Info("cashu wallet: minted a quote interrupted by a crash", "mint", o.c.URL(), "sats", p.amount())
		return nil
	case cashu.QuoteUnpaid:
		if q.Expiry == nil || time.Now().Unix() < *q.Expiry {
			return nil // it may yet be paid: kept
		}
	}
	o.ss.finish(p)
	return o.ss.save()
}

// lost drops an operation the mint carried out and will not answer again.
func (o *op) lost(p pendingOp) error {
	o.w.log.Warn("cashu wallet: an operation interrupted by a crash was carried out by the mint, which will not send its signatures again; its proofs are lost",
		"mint", o.c.URL(), "kind", p.Kind, "sats", p.amount())
	o.ss.finish(p)
	return o.ss.save()
}
