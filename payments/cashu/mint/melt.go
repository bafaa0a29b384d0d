package mint

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/cashu"
)

// meltQuote is a melt quote's record (NUT-05, NUT-23): the invoice to pay,
// its price, and how the payment went.
type meltQuote struct {
	ID          string                 `json:"id"`
	Request     string                 `json:"request"`
	PaymentHash string                 `json:"payment_hash"`
	Amount      uint64                 `json:"amount"`
	FeeReserve  uint64                 `json:"fee_reserve"`
	State       string                 `json:"state"`
	Expiry      int64                  `json:"expiry"`
	Preimage    string                 `json:"preimage,omitempty"`
	Change      []cashu.BlindSignature `json:"change,omitempty"`
	// Inputs are the Ys of the proofs paying it, while it pays.
	Inputs [][]byte `json:"inputs,omitempty"`
}

func (q meltQuote) response() cashu.MeltQuoteBolt11Response {
	exp := q.Expiry
	r := cashu.MeltQuoteBolt11Response{Quote: q.ID, Request: q.Request, Amount: q.Amount, Unit: Unit,
		FeeReserve: q.FeeReserve, State: q.State, Expiry: &exp, Change: q.Change}
	if q.Preimage != "" {
		r.PaymentPreimage = &q.Preimage
	}
	return r
}

func (m *Mint) putMeltQuote(ctx context.Context, q meltQuote) error {
	b, _ := json.Marshal(q) // of plain values: cannot fail
	return m.st.Put(ctx, spaceMeltQ, []byte(q.ID), b, time.Unix(q.Expiry, 0).Add(quoteRetention))
}

func (m *Mint) meltQuote(ctx context.Context, id string) (meltQuote, bool, error) {
	b, ok, err := m.st.Get(ctx, spaceMeltQ, []byte(id))
	if err != nil || !ok {
		return meltQuote{}, false, err
	}
	var q meltQuote
	if err := json.Unmarshal(b, &q); err != nil {
		return meltQuote{}, false, err
	}
	return q, true, nil
}

func (m *Mint) loadMeltQuote(ctx context.Context, id string) (meltQuote, error) {
	q, ok, err := m.meltQuote(ctx, id)
	if err != nil {
		return q, internal("reading a melt quote", err)
	}
	if !ok {
		return q, cashu.Errorf(CodeMalformed, "no such melt quote")
	}
	return q, nil
}

// MeltQuote prices paying a BOLT11 invoice (NUT-05, NUT-23): its amount
// rounded up to a sat, and the fee reserve.
func (m *Mint) MeltQuote(ctx context.Context, req cashu.MeltQuoteBolt11Request) (cashu.MeltQuoteBolt11Response, error) {
	if req.Unit != Unit {
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(cashu.CodeUnitNotSupported, "unit %q is not supported: this mint melts %s", req.Unit, Unit)
	}
	inv, err := bolt11.Decode(req.Request)
	if err != nil {
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(CodeMalformed, "request is not a BOLT11 invoice")
	}
	if inv.AmountMsat() <= 0 {
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(cashu.CodeAmountlessInvoice, "amountless invoices are not supported")
	}
	if inv.Expired(m.now()) {
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(cashu.CodeQuoteExpired, "the invoice has expired")
	}
	amount := uint64(inv.AmountMsat()+999) / 1000
	if amount > m.opts.MaxAmount {
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(cashu.CodeAmountOutsideLimit, "amount %d: at most %d", amount, m.opts.MaxAmount)
	}
	q := meltQuote{ID: newQuoteID(), Request: req.Request, PaymentHash: inv.PaymentHash(), Amount: amount,
		FeeReserve: m.opts.FeeReserve, State: cashu.QuoteUnpaid, Expiry: inv.ExpiresAt().Unix()}
	if err := m.putMeltQuote(ctx, q); err != nil {
		return cashu.MeltQuoteBolt11Response{}, internal("recording the quote", err)
	}
	return q.response(), nil
}

// GetMeltQuote answers GET /v1/melt/quote/bolt11/{quote}. A quote pending
// with no payment running here (the mint restarted while paying, or the
// wallet's answer was lost) is looked up: paid, it is settled as paid.
func (m *Mint) GetMeltQuote(ctx context.Context, id string) (cashu.MeltQuoteBolt11Response, error) {
	q, err := m.loadMeltQuote(ctx, id)
	if err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	m.mu.Lock()
	paying := m.paying[id]
	m.mu.Unlock()
	if q.State == cashu.QuotePending && !paying {
		if inv, err := m.ln.LookupInvoice(ctx, q.PaymentHash); err == nil && inv.Settled() {
			if q, err = m.settleMelt(ctx, q, inv.Preimage, nil); err != nil {
				return cashu.MeltQuoteBolt11Response{}, err
			}
		}
	}
	return q.response(), nil
}

// Melt pays a melt quote's invoice with proofs (NUT-05). The proofs are
// claimed (spent) and marked pending before the payment; if it fails they
// are released, unspent again; if it succeeds the marks go and they stay
// spent. Blank outputs (NUT-08) get back what the inputs paid above the
// amount and input fee (the whole fee reserve: the simulator's payments
// cost nothing).
func (m *Mint) Melt(ctx context.Context, req cashu.MeltBolt11Request) (cashu.MeltQuoteBolt11Response, error) {
	q, err := m.loadMeltQuote(ctx, req.Quote)
	if err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	in, inSum, fee, err := m.checkInputs(req.Inputs)
	if err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	outs, _, err := m.checkOutputs(req.Outputs, true)
	if err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	need := q.Amount + q.FeeReserve + fee
	if inSum < need {
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(cashu.CodeUnbalanced, "inputs %d are less than amount, fee reserve and input fee %d", inSum, need)
	}
	keys := claims(in, outs)
	if q, err = m.startMelt(ctx, q, keys, digest("melt", q.ID, keys, req.Outputs)); err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	defer func() {
		m.mu.Lock()
		delete(m.paying, q.ID)
		m.mu.Unlock()
	}()

	// The payment must not stop because the wallet hung up: its outcome
	// decides whether the proofs are spent.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.PayTimeout)
	preimage, err := m.ln.PayInvoice(pctx, q.Request)
	cancel()
	var werr *payments.WalletError
	switch {
	case errors.As(err, &werr):
		m.log.Info("mint: melt payment failed; its proofs are unspent again", "code", werr.Code)
		if rerr := m.failMelt(context.WithoutCancel(ctx), q, keys); rerr != nil {
			return cashu.MeltQuoteBolt11Response{}, internal("releasing a failed melt's proofs", rerr)
		}
		return cashu.MeltQuoteBolt11Response{}, cashu.Errorf(cashu.CodeLightningFailed, "the Lightning payment failed (%s)", werr.Code)
	case err != nil:
		m.log.Warn("mint: melt payment outcome unknown; the quote stays pending", "error", err)
		return q.response(), nil
	}
	change, err := m.change(outs, inSum-fee-q.Amount)
	if err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	if q, err = m.settleMelt(context.WithoutCancel(ctx), q, preimage, change); err != nil {
		return cashu.MeltQuoteBolt11Response{}, err
	}
	m.log.Info("mint: melted", "amount", q.Amount, "change", len(change))
	return q.response(), nil
}

// startMelt claims the inputs and change outputs for the quote, marks
// the inputs pending and the quote PENDING, all before the payment.
func (m *Mint) startMelt(ctx context.Context, q meltQuote, keys []claimKey, d []byte) (meltQuote, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, err := m.loadMeltQuote(ctx, q.ID)
	if err != nil {
		return q, err
	}
	switch q.State {
	case cashu.QuotePending:
		return q, cashu.Errorf(cashu.CodeQuotePending, "the quote is being paid")
	case cashu.QuotePaid:
		return q, cashu.Errorf(cashu.CodeInvoiceAlreadyPaid, "the quote's invoice is paid")
	}
	conflict, err := m.claimAll(ctx, keys, d)
	if err != nil {
		return q, internal("claiming", err)
	}
	if conflict >= 0 {
		return q, m.conflictError(ctx, keys[conflict], conflict)
	}
	// Marked only once claimed, so a mark is never another melt's; a
	// crash before the quote turns PENDING leaves the proofs spent, and
	// the same melt sent again takes up its own claims and goes on.
	q.Inputs = nil
	for _, k := range keys {
		if k.space == spaceSpent {
			q.Inputs = append(q.Inputs, k.key)
			if err := m.st.Put(ctx, spacePending, k.key, []byte(q.ID), m.forever()); err != nil {
				return q, internal("marking proofs pending", errors.Join(err, m.releaseAll(ctx, keys, nil)))
			}
		}
	}
	q.State = cashu.QuotePending
	if err := m.putMeltQuote(ctx, q); err != nil {
		return q, internal("recording the quote", errors.Join(err, m.releaseAll(ctx, keys, nil)))
	}
	m.paying[q.ID] = true
	return q, nil
}

// failMelt releases a failed melt's claims (its proofs unspent again),
// then its marks, then returns the quote to UNPAID.
func (m *Mint) failMelt(ctx context.Context, q meltQuote, keys []claimKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.releaseAll(ctx, keys, nil); err != nil {
		return err
	}
	for _, y := range q.Inputs {
		if err := m.st.Put(ctx, spacePending, y, nil, gone); err != nil {
			return err
		}
	}
	q.State, q.Inputs = cashu.QuoteUnpaid, nil
	return m.putMeltQuote(ctx, q)
}

// settleMelt records a paid melt: the quote PAID with its preimage and
// change first, then its inputs' pending marks cleared (spent for good).
func (m *Mint) settleMelt(ctx context.Context, q meltQuote, preimage string, change []cashu.BlindSignature) (meltQuote, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inputs := q.Inputs
	q.State, q.Preimage, q.Change, q.Inputs = cashu.QuotePaid, preimage, change, nil
	if err := m.putMeltQuote(ctx, q); err != nil {
		return q, internal("recording the quote", err)
	}
	for _, y := range inputs {
		if err := m.st.Put(ctx, spacePending, y, nil, gone); err != nil {
			return q, internal("clearing pending marks", err)
		}
	}
	return q, nil
}

// change signs the overpaid amount onto the blank outputs, in powers of
// two, largest first, as far as the outputs go.
func (m *Mint) change(outs []output, overpaid uint64) ([]cashu.BlindSignature, error) {
	amounts := cashu.SplitAmount(overpaid)
	var fill []output
	for i := len(amounts) - 1; i >= 0 && len(fill) < len(outs); i-- {
		o := outs[len(fill)]
		o.msg.Amount = amounts[i]
		if _, ok := m.ks.priv[o.msg.Amount]; !ok {
			continue
		}
		fill = append(fill, o)
	}
	return m.sign(fill)
}
