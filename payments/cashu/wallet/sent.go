package wallet

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/cvmgo/cvm/payments/cashu"
)

// hand delivers proofs held as a token. They leave the spendable proofs
// for a sent token, in one append, before deliver is called, and come
// back, in another, if it fails: whatever happens to the process, no
// proof handed out stays spendable, to be sent twice, and none is lost.
func (o *op) hand(send []cashu.Proof, deliver DeliverFunc) error {
	o.ss.handOut(send)
	if err := o.ss.save(); err != nil {
		return err
	}
	if err := deliver(cashu.Token{Mint: o.c.URL(), Unit: Unit, Proofs: send}); err != nil {
		o.ss.unsend(send, true)
		return errors.Join(err, o.ss.save())
	}
	return nil
}

// checkBatch bounds the proofs of sent tokens asked about at one
// compaction: mints cap a NUT-07 request (cvm mint-sim at 1000); the
// others wait for the next compaction.
const checkBatch = 1000

// compact rewrites the proof file as one record, forgetting the sent
// tokens the mint says are spent: one NUT-07 request, for the oldest
// tokens, per compaction rather than one per send. Without an answer,
// they are all kept for the next.
func (o *op) compact(ctx context.Context) error {
	toks := slices.SortedFunc(maps.Values(o.ss.state().sent), func(a, b sentToken) int { return a.Time.Compare(b.Time) })
	var proofs []cashu.Proof
	for len(toks) > 0 && len(proofs)+len(toks[0].Proofs) <= checkBatch {
		proofs = append(proofs, toks[0].Proofs...)
		toks = toks[1:]
	}
	var forget []string
	if len(proofs) > 0 {
		states, err := o.states(ctx, proofs)
		if err != nil {
			o.w.log.Warn("cashu wallet: the mint did not say which sent tokens are spent; all kept", "mint", o.c.URL(), "err", err)
		}
		for i := 0; err == nil && i < len(proofs); {
			t := o.ss.state().sent[proofs[i].Secret]
			spent := true
			for range t.Proofs {
				spent = spent && states[i] == cashu.StateSpent
				i++
			}
			if spent {
				forget = append(forget, t.key())
			}
		}
	}
	return o.ss.compact(forget)
}
