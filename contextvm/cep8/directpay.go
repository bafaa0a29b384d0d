package cep8

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// keepWait bounds how long a call's answer waits for the change of its
// direct payment to be kept (a mint swap, for Cashu: milliseconds) before
// it goes to the caller; the keeping goes on after it.
const keepWait = 30 * time.Second

// prepareWait bounds the wallet's preparation of a payload as a request
// is sent (a Cashu wallet may swap at its mint to make the exact amount).
const prepareWait = 15 * time.Second

// directPays are a Payer's direct payments in flight, by request.
type directPays struct {
	mu    sync.Mutex
	calls map[*jsonrpc.Request]*directPay
}

// directPay is the direct payment of one request: a payload out of the
// wallet until the server says what became of it.
type directPay struct {
	bearer   payments.Bearer
	prep     payments.Prepared
	offer    contextvm.PaymentOffer
	settled  bool          // accepted or rejected: its fate is known
	accepted bool          // accepted: the payload is the server's
	kept     chan struct{} // closed once the change is kept; nil without change
}

func newDirectPays(bearers []payments.Bearer) *directPays {
	if len(bearers) == 0 {
		return nil
	}
	return &directPays{calls: map[*jsonrpc.Request]*directPay{}}
}

// bearer is the Bearer that pays pmi, nil if none.
func (p *Payer) bearer(pmi string) payments.Bearer {
	for _, b := range p.opts.Bearers {
		if b.PMI() == pmi {
			return b
		}
	}
	return nil
}

// directTags are the direct_payment tag of call: the payload it carries
// already (sent again), or, for a priced call whose price the client
// knows in advance, to a server that takes the Bearer's PMI, a payload
// prepared now, within the budget and approved. This is what makes a
// direct-paid call one round trip. A call whose price is unknown carries
// none, and pays the payment_required that follows as any other.
func (p *Payer) directTags(call *contextvm.PaidCall) nostr.Tags {
	d := p.direct
	if d == nil {
		return nil
	}
	d.mu.Lock()
	dp := d.calls[call.Request()]
	d.mu.Unlock()
	if dp != nil {
		if dp.settled {
			return nil
		}
		return nostr.Tags{{TagDirectPayment, dp.bearer.PMI(), dp.prep.Payload}}
	}
	po := p.opts
	var b payments.Bearer
	for _, pmi := range call.ServerPMIs() {
		if b = p.bearer(pmi); b != nil {
			break
		}
	}
	price, known := call.Price()
	if b == nil || !known || po.Budget == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(usdRateWait, prepareWait))
	defer cancel()
	amount, ok := p.priceInSats(ctx, call, price)
	if !ok {
		return nil
	}
	offer := call.OfferFor(payments.PaymentRequired{Amount: amount, PMI: b.PMI(), Description: price.Capability}, contextvm.DefaultPriceUnit)
	if po.Budget.Check(offer.Server, amount, offer.Unit) != nil || po.Confirm != nil && !po.Confirm(ctx, offer) {
		return nil // the payment_required that follows is declined, and says why
	}
	if err := p.prepareDirect(ctx, call, b, offer, ""); err != nil {
		call.Logger().Debug("no direct payment with the request", "capability", price.Capability, "err", err)
		return nil
	}
	return p.directTags(call)
}

// priceInSats is what a call of known price is paid with unasked: a fixed
// sats price, or the most the client pays for a usd price at its own rate
// (the server keeps its price in sats and returns the rest as change).
func (p *Payer) priceInSats(ctx context.Context, call *contextvm.PaidCall, price contextvm.Price) (int64, bool) {
	usd, isUSD, err := p.usdLimit(ctx, call)
	if err != nil {
		return 0, false
	}
	if isUSD {
		return usd.Most, usd.Most > 0
	}
	lo, hi, err := price.Range()
	if err != nil || lo != hi || lo <= 0 || price.Unit != "" && price.Unit != contextvm.DefaultPriceUnit {
		return 0, false
	}
	return int64(math.Ceil(lo)), true
}

// prepareDirect takes a payload for offer out of b's wallet, counts its
// value against the budget (the change, when kept, is given back), and
// records it as call's direct payment. payReq is the server's payment
// request it answers, "" for a payment unasked.
func (p *Payer) prepareDirect(ctx context.Context, call *contextvm.PaidCall, b payments.Bearer, offer contextvm.PaymentOffer, payReq string) error {
	budget := p.opts.Budget
	prep, err := b.Prepare(ctx, offer.Amount, budget.PerCall, payReq)
	if err != nil {
		return err
	}
	if err := budget.Reserve(ctx, offer.Server, prep.Value, offer.Unit); err != nil {
		if rerr := b.Restore(context.WithoutCancel(ctx), prep.Payload); rerr != nil {
			call.Logger().Warn("a prepared payment could not go back to the wallet", "pmi", b.PMI(), "err", rerr)
		}
		return err
	}
	p.direct.mu.Lock()
	p.direct.calls[call.Request()] = &directPay{bearer: b, prep: prep, offer: offer}
	p.direct.mu.Unlock()
	return nil
}

// payDirect pays offer, a payment_required in the PMI of Bearer b: a
// payload prepared for it, and the request sent again carrying it (under
// explicit gating, Answered sends it again once this returns).
func (p *Payer) payDirect(ctx context.Context, call *contextvm.PaidCall, b payments.Bearer, offer contextvm.PaymentOffer, req payments.PaymentRequired) error {
	if err := p.prepareDirect(ctx, call, b, offer, req.PayReq); err != nil {
		return call.Decline(offer, BudgetReason(err), err)
	}
	call.Handing()
	if !p.opts.ExplicitGating {
		call.Resend(ctx)
	}
	return nil
}

// Notice takes what a server says of a direct payment: payment_accepted
// (the payload is the server's: its change kept, in the wallet, before
// the call's answer goes to its caller, see Answered) and payment_rejected
// (it goes back to the wallet, and the call waits for the normal flow
// that follows). Change sent again after its call ended is kept too.
func (p *Payer) Notice(call *contextvm.PaidCall, n contextvm.PaymentNotice) bool {
	d := p.direct
	if d == nil {
		return false
	}
	var params struct {
		PMI     string      `json:"pmi"`
		Amount  json.Number `json:"amount"`
		Message string      `json:"message"`
	}
	json.Unmarshal(n.Params, &params)
	changes := p.changes(n.Tags)
	if call == nil {
		if n.Method != contextvm.MethodPaymentAccepted || len(changes) == 0 {
			return false
		}
		// Change the server kept for this client while it was away.
		ctx, cancel := context.WithTimeout(context.Background(), keepWait)
		defer cancel()
		p.keepChange(ctx, n.Logger, n.Server.Hex(), changes)
		return true
	}
	d.mu.Lock()
	dp := d.calls[call.Request()]
	if dp == nil || dp.settled || params.PMI != dp.bearer.PMI() ||
		n.Method != contextvm.MethodPaymentAccepted && n.Method != contextvm.MethodPaymentRejected {
		d.mu.Unlock()
		return false
	}
	dp.settled = true
	dp.accepted = n.Method == contextvm.MethodPaymentAccepted
	if dp.accepted && len(changes) > 0 {
		dp.kept = make(chan struct{})
	}
	d.mu.Unlock()
	if !dp.accepted {
		p.Report(contextvm.PaymentReport{PaymentOffer: dp.offer, Rejected: true, Message: params.Message})
		call.Go(func(ctx context.Context) { p.giveBack(ctx, call, dp) })
		return true
	}
	amount, _ := params.Amount.Int64()
	switch {
	case amount > dp.offer.Amount:
		call.Logger().Warn("the server kept more of a direct payment than the price", "pmi", dp.offer.PMI, "price", dp.offer.Amount, "kept", amount)
	case dp.prep.Value > amount && len(changes) == 0:
		call.Logger().Warn("the server returned no change of a direct payment", "pmi", dp.offer.PMI, "sent", dp.prep.Value, "kept", amount)
	}
	call.MarkPaid()
	paid := dp.offer
	paid.Amount = directCost(dp.prep.Value, amount, len(changes) > 0)
	p.Report(contextvm.PaymentReport{PaymentOffer: paid, Paid: true,
		Receipt: payments.Receipt{Amount: amount, PMI: dp.offer.PMI, PaidAt: time.Now()}})
	if dp.kept != nil {
		call.Go(func(ctx context.Context) {
			defer close(dp.kept)
			p.keepChange(ctx, call.Logger(), dp.offer.Server, changes)
		})
	}
	return false // the client reports the acceptance, as for any payment
}

// directCost is what a direct payment worth sent cost the client, as it
// is reported: what the server says it kept when it returned change (the
// rest comes back; for a usd price the payload is the most the client
// pays at its own rate, not the price), and all of the payload when it
// returned none or says it kept nothing or more than was sent.
func directCost(sent, kept int64, change bool) int64 {
	if change && kept > 0 && kept <= sent {
		return kept
	}
	return sent
}

// changes are the change tags of a payment_accepted that a Bearer here
// can keep.
func (p *Payer) changes(tags nostr.Tags) []nostr.Tag {
	var out []nostr.Tag
	for _, t := range tags {
		if len(t) >= 3 && t[0] == TagChange && t[2] != "" && p.bearer(t[1]) != nil {
			out = append(out, t)
		}
	}
	return out
}

// keepChange keeps each change in its wallet, and gives what it was worth
// back to the budget, which counted the whole payload.
func (p *Payer) keepChange(ctx context.Context, log *slog.Logger, server string, changes []nostr.Tag) {
	for _, t := range changes {
		b := p.bearer(t[1])
		value, err := b.KeepChange(ctx, t[2])
		if err != nil {
			log.Warn("change from the server not kept", "server", server, "pmi", t[1], "err", err)
			continue
		}
		if p.opts.Budget != nil {
			if err := p.opts.Budget.Refund(context.WithoutCancel(ctx), server, value); err != nil {
				log.Warn("could not give change back to the budget", "err", err)
			}
		}
	}
}

// giveBack puts a payload the server did not take back in its wallet,
// which checks it is unspent, and its value back in the budget.
func (p *Payer) giveBack(ctx context.Context, call *contextvm.PaidCall, dp *directPay) {
	if err := dp.bearer.Restore(ctx, dp.prep.Payload); err != nil {
		call.Logger().Warn("a direct payment the server did not take could not go back to the wallet", "pmi", dp.offer.PMI, "err", err)
		return
	}
	if err := p.opts.Budget.Refund(context.WithoutCancel(ctx), dp.offer.Server, dp.prep.Value); err != nil {
		call.Logger().Warn("could not give back an unspent budget reservation", "err", err)
	}
}

// directAnswered ends call's direct payment as its answer resp arrives:
// the change is kept first; a result with no word of the payment says it
// was taken; a payload of which an error answer says nothing is given to
// the wallet to check and take back if unspent. An answer that has the
// request sent again (busy) keeps it, to go with it again.
func (p *Payer) directAnswered(call *contextvm.PaidCall, resp *jsonrpc.Response) {
	d := p.direct
	if d == nil {
		return
	}
	if _, again := contextvm.RetryAfter(resp.Error); again && resp.Error != nil {
		return
	}
	d.mu.Lock()
	dp := d.calls[call.Request()]
	delete(d.calls, call.Request())
	settled := dp != nil && dp.settled
	d.mu.Unlock()
	switch {
	case dp == nil:
	case dp.kept != nil:
		t := time.NewTimer(keepWait)
		select {
		case <-dp.kept:
		case <-t.C:
			call.Logger().Warn("the answer goes to the caller before its change is kept", "pmi", dp.offer.PMI)
		}
		t.Stop()
	case !settled && resp.Error == nil:
		// The request ran and the server said nothing of its payment: it
		// took it. A server redeems a direct payment before the request
		// runs, names one it does not take (payment_rejected) before
		// anything else, and sends payment_accepted only with change.
		call.MarkPaid()
		paid := dp.offer
		paid.Amount = dp.prep.Value
		p.Report(contextvm.PaymentReport{PaymentOffer: paid, Paid: true,
			Receipt: payments.Receipt{Amount: dp.prep.Value, PMI: dp.offer.PMI, PaidAt: time.Now()}})
		p.Report(contextvm.PaymentReport{PaymentOffer: paid, Paid: true, Accepted: true})
	case !settled:
		call.Logger().Info("the server said nothing of a direct payment; the wallet takes it back if it is unspent", "pmi", dp.offer.PMI)
		call.Go(func(ctx context.Context) { p.giveBack(ctx, call, dp) })
	}
}
