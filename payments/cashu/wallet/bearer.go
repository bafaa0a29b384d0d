package wallet

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
)

// Bearer is the client side of Cashu direct payments: it pays from a
// Wallet with tokens of exactly the price (swapping at the mint for them
// when no proofs add up to it), keeps the change a server returns, and
// puts back tokens a server did not take.
type Bearer struct{ w *Wallet }

// NewBearer pays from w.
func NewBearer(w *Wallet) *Bearer { return &Bearer{w: w} }

// PMI is PMIDirect.
func (b *Bearer) PMI() string { return PMIDirect }

// Prepare takes a token of exactly amount out of the wallet (and the
// mint's input fee on it, which the server's swap pays), at the mint
// holding the most among those payReq accepts (any, without a request).
// The token's proofs leave the proof file as it returns.
func (b *Bearer) Prepare(ctx context.Context, amount, maxValue int64, payReq string) (payments.Prepared, error) {
	if amount <= 0 || amount > maxValue {
		return payments.Prepared{}, fmt.Errorf("%w: %d sats with at most %d", payments.ErrNotPayable, amount, maxValue)
	}
	mint, err := b.mintFor(uint64(amount), payReq)
	if err != nil {
		return payments.Prepared{}, err
	}
	var enc string
	value, err := b.w.SendCovering(ctx, mint, uint64(amount), uint64(maxValue), func(t cashu.Token) (err error) {
		enc, err = t.EncodeV4()
		return err
	})
	if err != nil {
		return payments.Prepared{}, fmt.Errorf("%w: %w", payments.ErrNotPayable, err)
	}
	return payments.Prepared{Payload: enc, Value: int64(value)}, nil
}

// mintFor is the mint to pay amount from: one the payment request payReq
// accepts (any when there is none, or it names none) where the wallet
// holds enough, the one holding most.
func (b *Bearer) mintFor(amount uint64, payReq string) (string, error) {
	var accepted []string
	if payReq != "" {
		req, err := cashu.DecodePaymentRequest(payReq)
		if err != nil {
			return "", fmt.Errorf("%w: %w", payments.ErrNotPayable, err)
		}
		if req.Unit != "" && req.Unit != Unit || req.Amount != 0 && req.Amount != amount {
			return "", fmt.Errorf("%w: the request asks %d %.16q, the price is %d %s", payments.ErrNotPayable, req.Amount, req.Unit, amount, Unit)
		}
		for _, m := range req.Mints {
			if u, err := NormalizeMintURL(m); err == nil {
				accepted = append(accepted, u)
			}
		}
	}
	held, err := b.w.Balance()
	if err != nil {
		return "", err
	}
	held = slices.DeleteFunc(held, func(m MintBalance) bool {
		return m.Sats < amount || len(accepted) > 0 && !slices.Contains(accepted, m.Mint)
	})
	if len(held) == 0 {
		if len(accepted) > 0 {
			return "", fmt.Errorf("%w: %w: %d sats wanted at one of %v", payments.ErrNotPayable, ErrInsufficient, amount, accepted)
		}
		return "", fmt.Errorf("%w: %w: %d sats wanted at one mint", payments.ErrNotPayable, ErrInsufficient, amount)
	}
	return slices.MaxFunc(held, func(a, b MintBalance) int { return cmp.Compare(a.Sats, b.Sats) }).Mint, nil
}

// KeepChange receives a change token into the wallet (Receive: DLEQ
// proofs checked, swapped at its mint).
func (b *Bearer) KeepChange(ctx context.Context, payload string) (int64, error) {
	tok, err := cashu.DecodeToken(payload)
	if err != nil {
		return 0, err
	}
	n, err := b.w.Receive(ctx, tok)
	return int64(n), err
}

// Restore puts a prepared token's proofs back in the wallet once the mint
// says none is spent or pending.
func (b *Bearer) Restore(ctx context.Context, payload string) error {
	tok, err := cashu.DecodeToken(payload)
	if err != nil {
		return err
	}
	return b.w.Restore(ctx, tok)
}

// Restore puts back into the wallet a token it sent and that was not
// taken: its proofs, once the mint says all are unspent (NUT-07), out of
// the sent tokens and among the spendable ones. The wallet's own proofs
// need no swap: nobody else took them.
func (w *Wallet) Restore(ctx context.Context, tok cashu.Token) error {
	o, err := w.begin(ctx, tok.Mint)
	if err != nil {
		return err
	}
	defer o.end()
	states, err := o.states(ctx, tok.Proofs)
	if err != nil {
		return err
	}
	for _, st := range states {
		if st != cashu.StateUnspent {
			return fmt.Errorf("%w: the mint says a proof of the token is %s; not put back", ErrSpent, st)
		}
	}
	o.ss.unsend(tok.Proofs, true)
	return o.ss.save()
}

var _ payments.Bearer = (*Bearer)(nil)
