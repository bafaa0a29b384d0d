package mint

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

// mintQuote is a mint quote's record (NUT-04, NUT-23): the invoice it
// made and whether it is paid and issued.
type mintQuote struct {
	ID          string `json:"id"`
	Request     string `json:"request"`
	PaymentHash string `json:"payment_hash"`
	Amount      uint64 `json:"amount"`
	State       string `json:"state"`
	Expiry      int64  `json:"expiry"`
}

// quoteRetention is how long a quote's record outlives its expiry: a
// wallet may come back for a paid quote's ecash, or ask about a melt,
// well after the invoice lapsed.
const quoteRetention = 30 * 24 * time.Hour

func (q mintQuote) response() cashu.MintQuoteBolt11Response {
	exp := q.Expiry
	return cashu.MintQuoteBolt11Response{Quote: q.ID, Request: q.Request, Amount: q.Amount, Unit: Unit, State: q.State, Expiry: &exp}
}

func (m *Mint) putMintQuote(ctx context.Context, q mintQuote) error {
	b, _ := json.Marshal(q) // strings and numbers: cannot fail
	return m.st.Put(ctx, spaceMintQ, []byte(q.ID), b, time.Unix(q.Expiry, 0).Add(quoteRetention))
}

func (m *Mint) mintQuote(ctx context.Context, id string) (mintQuote, error) {
	b, ok, err := m.st.Get(ctx, spaceMintQ, []byte(id))
	if err != nil {
		return mintQuote{}, internal("reading a mint quote", err)
	}
	var q mintQuote
	if !ok || json.Unmarshal(b, &q) != nil {
		return mintQuote{}, cashu.Errorf(CodeMalformed, "no such mint quote")
	}
	return q, nil
}

// MintQuote makes the invoice of a mint quote (NUT-04, NUT-23) through the
// Lightning and, with a Notifier, watches for its payment.
func (m *Mint) MintQuote(ctx context.Context, req cashu.MintQuoteBolt11Request) (cashu.MintQuoteBolt11Response, error) {
	if req.Unit != Unit {
		return cashu.MintQuoteBolt11Response{}, cashu.Errorf(cashu.CodeUnitNotSupported, "unit %q is not supported: this mint issues %s", req.Unit, Unit)
	}
	if req.Amount == 0 || req.Amount > m.opts.MaxAmount {
		return cashu.MintQuoteBolt11Response{}, cashu.Errorf(cashu.CodeAmountOutsideLimit, "amount %d: want 1 to %d", req.Amount, m.opts.MaxAmount)
	}
	inv, err := m.ln.MakeInvoice(ctx, int64(req.Amount)*1000, req.Description, m.opts.QuoteTTL)
	if err != nil {
		return cashu.MintQuoteBolt11Response{}, internal("making the invoice", err)
	}
	exp := inv.ExpiresAt
	if exp.IsZero() {
		exp = m.now().Add(m.opts.QuoteTTL)
	}
	q := mintQuote{ID: newQuoteID(), Request: inv.Bolt11, PaymentHash: inv.PaymentHash, Amount: req.Amount,
		State: cashu.QuoteUnpaid, Expiry: exp.Unix()}
	if err := m.putMintQuote(ctx, q); err != nil {
		return cashu.MintQuoteBolt11Response{}, internal("recording the quote", err)
	}
	if n, ok := m.ln.(Notifier); ok {
		m.wg.Go(func() { m.watch(n, q.ID, q.PaymentHash, exp) })
	}
	m.log.Debug("mint: mint quote", "amount", q.Amount, "expiry", exp)
	return q.response(), nil
}

// watch marks the quote paid when the Lightning says its invoice is; it
// gives up when the invoice expires or the mint closes.
func (m *Mint) watch(n Notifier, id, hash string, expiry time.Time) {
	ctx, cancel := context.WithDeadline(m.ctx, expiry)
	defer cancel()
	inv, err := n.Received(ctx, hash)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("mint: waiting for a quote's payment", "error", err)
		}
		return
	}
	if inv.Settled() {
		if err := m.markPaid(m.ctx, id); err != nil {
			m.log.Warn("mint: marking a quote paid", "error", err)
		}
	}
}

// markPaid moves an UNPAID mint quote to PAID.
func (m *Mint) markPaid(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, err := m.mintQuote(ctx, id)
	if err != nil || q.State != cashu.QuoteUnpaid {
		return err
	}
	q.State = cashu.QuotePaid
	return m.putMintQuote(ctx, q)
}

// refreshMintQuote returns the quote, looking its invoice up first while
// it is unpaid: how a quote is found paid without a notification.
func (m *Mint) refreshMintQuote(ctx context.Context, id string) (mintQuote, error) {
	q, err := m.mintQuote(ctx, id)
	if err != nil || q.State != cashu.QuoteUnpaid {
		return q, err
	}
	inv, err := m.ln.LookupInvoice(ctx, q.PaymentHash)
	if err != nil {
		m.log.Warn("mint: looking a quote's invoice up", "error", err)
		return q, nil
	}
	if !inv.Settled() {
		return q, nil
	}
	if err := m.markPaid(ctx, id); err != nil {
		return q, internal("marking a quote paid", err)
	}
	return m.mintQuote(ctx, id)
}

// GetMintQuote answers GET /v1/mint/quote/bolt11/{quote}.
func (m *Mint) GetMintQuote(ctx context.Context, id string) (cashu.MintQuoteBolt11Response, error) {
	q, err := m.refreshMintQuote(ctx, id)
	if err != nil {
		return cashu.MintQuoteBolt11Response{}, err
	}
	return q.response(), nil
}

// MintTokens signs the outputs of a paid quote (NUT-04), once: the quote
// is claimed with the outputs, so a second request for it is refused
// (the same request sent again gets the same signatures).
func (m *Mint) MintTokens(ctx context.Context, req cashu.MintBolt11Request) (cashu.MintBolt11Response, error) {
	q, err := m.refreshMintQuote(ctx, req.Quote)
	if err != nil {
		return cashu.MintBolt11Response{}, err
	}
	if q.State == cashu.QuoteUnpaid {
		if m.now().Unix() >= q.Expiry {
			return cashu.MintBolt11Response{}, cashu.Errorf(cashu.CodeQuoteExpired, "the quote expired unpaid")
		}
		return cashu.MintBolt11Response{}, cashu.Errorf(cashu.CodeQuoteNotPaid, "the quote is not paid")
	}
	if len(req.Outputs) == 0 {
		return cashu.MintBolt11Response{}, cashu.Errorf(CodeMalformed, "no outputs")
	}
	outs, sum, err := m.checkOutputs(req.Outputs, false)
	if err != nil {
		return cashu.MintBolt11Response{}, err
	}
	if sum != q.Amount {
		return cashu.MintBolt11Response{}, cashu.Errorf(cashu.CodeUnbalanced, "outputs %d are not the quote's %d", sum, q.Amount)
	}
	keys := append([]claimKey{{spaceIssued, []byte(q.ID)}}, claims(nil, outs)...)
	issued := func() error {
		q.State = cashu.QuoteIssued
		return m.putMintQuote(ctx, q)
	}
	if err := m.claim(ctx, keys, digest("mint", q.ID, keys, req.Outputs), issued); err != nil {
		return cashu.MintBolt11Response{}, err
	}
	sigs, err := m.sign(outs)
	if err != nil {
		return cashu.MintBolt11Response{}, err
	}
	m.log.Info("mint: issued", "amount", q.Amount, "outputs", len(outs))
	return cashu.MintBolt11Response{Signatures: sigs}, nil
}
