package wallet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
)

// PMIDirect is Cashu's direct payment method (CEP-8 direct_payment, named
// as CEP-21 names such PMIs): a cashuB token in the request, its change a
// cashuB token on payment_accepted.
const PMIDirect = "bitcoin-cashu-v4-direct"

// Redeemer is the server side of Cashu direct payments: it redeems tokens
// of the mints it accepts into a Wallet, the server's own, keeping the
// price and returning the rest as change. It is also a Requirer: its
// payment requests are NUT-18 creqA requests answered in-band.
type Redeemer struct {
	w     *Wallet
	mints []string // normalized
}

// NewRedeemer is a Redeemer of tokens of mints into w.
func NewRedeemer(w *Wallet, mints []string) (*Redeemer, error) {
	if len(mints) == 0 {
		return nil, errors.New("cashu redeemer: no mint accepted")
	}
	r := &Redeemer{w: w}
	for _, m := range mints {
		u, err := NormalizeMintURL(m)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(r.mints, u) {
			r.mints = append(r.mints, u)
		}
	}
	return r, nil
}

// PMI is PMIDirect.
func (r *Redeemer) PMI() string { return PMIDirect }

// Mints are the mints whose tokens are accepted, normalized.
func (r *Redeemer) Mints() []string { return slices.Clone(r.mints) }

// Redeem checks the token whole (decoding, unit, mint, keysets, value
// against the price and the mint's input fee) before it sends anything, then swaps it at its mint for the price, kept in the
// wallet, and the change, returned as a token. A swap the mint refused
// (spent or pending proofs among the reasons) consumed nothing and is a
// rejection; one whose answer never came, or came wrong (a mint that
// lies), is an error of unknown outcome: its outputs stay pending in the
// wallet, which finishes the swap on its next operation at that mint and
// keeps it all.
func (r *Redeemer) Redeem(ctx context.Context, c payments.Charge, payload string) (payments.Redeemed, error) {
	if c.Unit != "" && c.Unit != "sats" {
		return payments.Redeemed{}, payments.Reject(fmt.Errorf("%w: a price in %s, Cashu pays sats", payments.ErrForeign, c.Unit), 0)
	}
	if c.Amount <= 0 {
		return payments.Redeemed{}, fmt.Errorf("cashu redeemer: a charge of %d", c.Amount)
	}
	tok, mint, total, err := r.token(payload)
	if err != nil {
		return payments.Redeemed{}, err
	}
	o, err := r.w.begin(ctx, mint)
	if err != nil {
		return payments.Redeemed{}, err
	}
	defer o.end()
	need, err := o.redeemable(ctx, tok.Proofs, uint64(c.Amount), total)
	if err != nil {
		return payments.Redeemed{}, err
	}
	price := cashu.SplitAmount(uint64(c.Amount))
	proofs, err := o.swapKeeping(ctx, tok.Proofs, false, append(slices.Clone(price), cashu.SplitAmount(total-need)...), len(price))
	if err != nil {
		var me *cashu.Error
		switch {
		case errors.Is(err, ErrSpent), errors.Is(err, &cashu.Error{Code: cashu.CodeProofsPending}):
			return payments.Redeemed{}, payments.Reject(fmt.Errorf("%w: %w", payments.ErrSpent, err), 0)
		case errors.As(err, &me): // refused: the swap did not happen
			return payments.Redeemed{}, payments.Reject(fmt.Errorf("%w: %w", payments.ErrInvalidPayload, err), 0)
		}
		return payments.Redeemed{}, fmt.Errorf("cashu redeemer: the swap at %s: %w", mint, err)
	}
	red := payments.Redeemed{Amount: int64(need)}
	if change := proofs[len(price):]; len(change) > 0 {
		enc, err := cashu.Token{Mint: mint, Unit: Unit, Proofs: change}.EncodeV4()
		if err != nil {
			return payments.Redeemed{}, fmt.Errorf("cashu redeemer: encoding the change: %w", err)
		}
		red.Change, red.ChangeAmount = enc, int64(total-need)
	}
	return red, nil
}

// token decodes a payload: a token in sats of an accepted mint, worth
// something.
func (r *Redeemer) token(payload string) (tok cashu.Token, mint string, total uint64, err error) {
	tok, err = cashu.DecodeToken(payload)
	if err != nil {
		return tok, "", 0, payments.Reject(fmt.Errorf("%w: %w", payments.ErrInvalidPayload, err), 0)
	}
	if tok.Unit != Unit {
		return tok, "", 0, payments.Reject(fmt.Errorf("%w: a token in %.16q, not %s", payments.ErrForeign, tok.Unit, Unit), 0)
	}
	mint, err = NormalizeMintURL(tok.Mint)
	if err != nil || !slices.Contains(r.mints, mint) {
		return tok, "", 0, payments.Reject(fmt.Errorf("%w: a token of mint %.80q; accepted: %v", payments.ErrForeign, tok.Mint, r.mints), 0)
	}
	total, ok := tok.Amount()
	if !ok || total == 0 {
		return tok, "", 0, payments.Reject(fmt.Errorf("%w: a token worth nothing, or overflowing", payments.ErrInvalidPayload), 0)
	}
	return tok, mint, total, nil
}

// redeemable checks proofs worth total before they are swapped for a
// price: their keysets (a mint that cannot be asked is an error, a keyset
// it does not have a rejection), a key for each amount, their value
// against the price and the input fee. Neither their DLEQ proofs nor
// their state (NUT-07) are checked: the swap that follows at once is the
// authority on both — the mint verifies each signature itself, and a
// swap it refuses (forged, spent, pending) consumed nothing — so the
// four scalar multiplications of a DLEQ proof and a request per call
// would buy nothing but time on every paid call. It returns what the
// payment costs the client: the price and the fee.
func (o *op) redeemable(ctx context.Context, proofs []cashu.Proof, price, total uint64) (uint64, error) {
	for i, p := range proofs {
		ks, err := o.keys.keyset(ctx, p.ID)
		if err == nil {
			if _, ok := ks.Keys[p.Amount]; !ok {
				err = fmt.Errorf("proof %d: %w: keyset %s has no key for %d", i, ErrKeyset, p.ID, p.Amount)
			}
		}
		if errors.Is(err, ErrKeyset) {
			return 0, payments.Reject(fmt.Errorf("%w: %w", payments.ErrInvalidPayload, err), 0)
		} else if err != nil {
			return 0, err
		}
	}
	fee, err := o.keys.fees(proofs)
	if err != nil {
		return 0, payments.Reject(fmt.Errorf("%w: %w", payments.ErrInvalidPayload, err), 0)
	}
	need := price + fee
	if total < need {
		return 0, payments.Reject(fmt.Errorf("%w: a token of %d sats, the mint's input fee %d", payments.ErrInsufficient, total, fee), int64(need))
	}
	return need, nil
}

// Require asks for c.Amount in sats of the accepted mints by a NUT-18
// payment request, single use, with no transport: the token comes back
// in-band, as the direct_payment of the request sent again.
func (r *Redeemer) Require(_ context.Context, c payments.Charge) (payments.PaymentRequired, error) {
	if c.Unit != "" && c.Unit != "sats" {
		return payments.PaymentRequired{}, fmt.Errorf("cashu redeemer: a price in %s, Cashu pays sats", c.Unit)
	}
	id := make([]byte, 8)
	rand.Read(id)
	req := cashu.PaymentRequest{ID: hex.EncodeToString(id), Amount: uint64(c.Amount), Unit: Unit, SingleUse: true,
		Mints: r.Mints(), Transports: []cashu.Transport{}}
	enc, err := req.Encode()
	if err != nil {
		return payments.PaymentRequired{}, err
	}
	return payments.PaymentRequired{Amount: c.Amount, PMI: PMIDirect, Description: c.Description, PayReq: enc}, nil
}

var (
	_ payments.Redeemer = (*Redeemer)(nil)
	_ payments.Requirer = (*Redeemer)(nil)
)
