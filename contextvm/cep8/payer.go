package cep8

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// PayOptions make a client pay for priced requests (CEP-8): give
// PayOptions.Payer as ClientOptions.Payer. Without them a request that a
// server asks payment for fails at once with CodePaymentDeclined, rather
// than waiting for its timeout.
//
// A payment is made only when all agree: the price is within Budget (its
// per-call cap, which every payment needs, its unit, its allowed servers
// and its daily limits), Confirm approves it, and a Handler for the
// payment method pays it. Until the server answers, the request is kept
// alive: its timeout restarted and, where the caller asked for progress,
// progress notifications telling it a payment is under way.
type PayOptions struct {
	Handlers []payments.Handler
	// Bearers pay direct payments (CEP-8's direct_payment; see
	// directpay.go) to servers that list their PMI: with the request
	// itself when its price is known in advance (one round trip), else in
	// answer to a payment_required in their PMI. A payload's whole value
	// counts against the budget until its change comes back, and is never
	// above the per-call cap.
	Bearers []payments.Bearer
	// Budget holds the per-call cap, the daily limits and the servers
	// allowed to charge. Nil pays nothing.
	Budget *payments.Budget
	// Confirm is asked before each payment within the budget; nil
	// approves.
	Confirm func(ctx context.Context, o contextvm.PaymentOffer) bool
	// Report, if set, is told of each payment and of what the server said
	// of it.
	Report func(contextvm.PaymentReport)
	// ExplicitGating asks servers for CEP-8 explicit gating: a priced
	// request is answered -32042 with its payment options, paid, and sent
	// again. A payer that asks for it opens no channel.
	ExplicitGating bool
	// Channel, when set, pays servers that offer prepaid payment channels
	// over one (a deposit above zero; see ChannelOptions), and lists and
	// closes the channels of its Store.
	Channel *ChannelOptions
	// Rates converts a price a server announced in usd into sats, to
	// check the amount in sats the server asks for it: at most Tolerance
	// above the price at this rate. Without it, or when it fails, a
	// usd-priced call is declined (DeclinedNoRate) before anything is
	// paid. Budgets stay in sats.
	Rates payments.Rates
	// Tolerance is how far above its own conversion of a usd price the
	// client pays, as a fraction (payments.DefaultTolerance, 2%, when
	// zero; none when negative).
	Tolerance float64
}

// Payer is the client's Payer of o; nil (no Payer: nothing is paid) for a
// nil o.
func (o *PayOptions) Payer() contextvm.Payer {
	if o == nil {
		return nil
	}
	p := &Payer{opts: *o, direct: newDirectPays(o.Bearers)}
	if !o.ExplicitGating {
		p.ch = newChannels(o.Channel)
	}
	return p
}

// A Payer pays for a client's priced requests as its PayOptions say.
type Payer struct {
	opts   PayOptions
	ch     *channels   // nil without PayOptions.Channel
	direct *directPays // nil without PayOptions.Bearers
}

// Tags ask for explicit gating, with the discovery tags, when the options
// do; on a priced call to a server that offers channels, they carry its
// channel receipt (or ask to open or top up the channel).
func (p *Payer) Tags(call *contextvm.PaidCall, discovery bool) nostr.Tags {
	if discovery && p.opts.ExplicitGating {
		// On a request sent again after its payment, with that payment
		// when it is a direct one.
		return append(nostr.Tags{{contextvm.TagPaymentInteraction, contextvm.PaymentExplicitGating}}, p.directTags(call)...)
	}
	if p.ch != nil {
		// A usd price's receipt is held to the client's rate as an
		// invoice is: over it, or with no rate to tell, the call carries
		// no receipt, and Pay declines the invoice that follows.
		ctx, cancel := context.WithTimeout(context.Background(), usdRateWait)
		defer cancel()
		usd, isUSD, err := p.usdLimit(ctx, call)
		if err != nil {
			return nil
		}
		most := int64(-1)
		if isUSD {
			most = usd.Most
		}
		if tags := p.ch.tags(call, p.opts.Budget, most); tags != nil {
			return tags
		}
	}
	return p.directTags(call)
}

// usdRateWait bounds the wait for the client's usd rate before a request
// is sent: a rate source's fetch, bounded by its own fetcher too (10 s).
const usdRateWait = 15 * time.Second

// ExplicitGating reports whether the payer asks servers for explicit
// gating.
func (p *Payer) ExplicitGating() bool { return p.opts.ExplicitGating }

// Report tells the options' Report.
func (p *Payer) Report(r contextvm.PaymentReport) {
	if p.opts.Report != nil {
		p.opts.Report(r)
	}
}

// Pay decides on and makes the payment of offer for call: within the
// budget, approved, through the handler of its payment method.
func (p *Payer) Pay(ctx context.Context, call *contextvm.PaidCall, offer contextvm.PaymentOffer, req payments.PaymentRequired) (err error) {
	po := p.opts
	if po.Budget == nil {
		return call.Decline(offer, contextvm.DeclinedNoCap, payments.ErrNoCap)
	}
	reserve := po.Budget.Reserve
	var m channelMeta
	json.Unmarshal(req.Meta, &m)
	if p.ch != nil && m.Channel == nil && p.ch.funds(call) {
		// The server ignored the request to fund a channel (it listed
		// channels once and no longer offers them): what it asks for is
		// the call's price, paid as any price.
		p.ch.unfund(call)
	}
	usd, _, err := p.usdLimit(ctx, call)
	if err != nil {
		return call.Decline(offer, contextvm.DeclinedNoRate, err)
	}
	if p.ch != nil && p.ch.funds(call) {
		defer func() {
			if err != nil {
				p.ch.unfund(call)
			}
		}()
		// A channel's deposit: the amount asked must be the deposit asked
		// for, the call's own price within the cap.
		switch {
		case m.Channel == nil || offer.Amount != p.ch.opts.DepositSats || int64(m.Channel.Deposit) != offer.Amount*1000:
			err := fmt.Errorf("the server asked %d %s for a channel deposit of %d sats", offer.Amount, offer.Unit, p.ch.opts.DepositSats)
			return call.Decline(offer, contextvm.DeclinedMalformed, err)
		case uint64(m.Channel.Cost) > uint64(max(po.Budget.PerCall, 0))*1000:
			err := fmt.Errorf("%w: %w: the call costs %d msat, cap %d", payments.ErrBudget, payments.ErrOverCap, m.Channel.Cost, po.Budget.PerCall)
			return call.Decline(offer, contextvm.DeclinedOverCap, err)
		}
		if err := usd.Check(int64((uint64(m.Channel.Cost) + 999) / 1000)); err != nil {
			return call.Decline(offer, contextvm.DeclinedOverRate, err)
		}
		reserve = po.Budget.ReserveDeposit
	} else if err := po.Budget.Check(offer.Server, offer.Amount, offer.Unit); err != nil {
		return call.Decline(offer, BudgetReason(err), err)
	} else if err := usd.Check(offer.Amount); err != nil {
		return call.Decline(offer, contextvm.DeclinedOverRate, err)
	}
	h, b := p.handler(offer.PMI), p.bearer(offer.PMI)
	if h == nil && b == nil {
		return call.Decline(offer, contextvm.DeclinedNoHandler, fmt.Errorf("no wallet here pays %s", offer.PMI))
	}
	if po.Confirm != nil && !po.Confirm(ctx, offer) {
		return call.Decline(offer, contextvm.DeclinedByPerson, errors.New("payment not approved"))
	}
	if h == nil {
		return p.payDirect(ctx, call, b, offer, req)
	}
	if err := reserve(ctx, offer.Server, offer.Amount, offer.Unit); err != nil {
		return call.Decline(offer, BudgetReason(err), err)
	}
	if !call.Pending() {
		po.Budget.Refund(context.WithoutCancel(ctx), offer.Server, offer.Amount)
		return errors.New("the request ended before it was paid")
	}
	call.Handing()
	receipt, err := h.Pay(ctx, req, offer.Amount)
	if err != nil {
		if rerr := po.Budget.Refund(context.WithoutCancel(ctx), offer.Server, offer.Amount); rerr != nil {
			call.Logger().Warn("could not give back an unspent budget reservation", "err", rerr)
		}
		return call.Decline(offer, contextvm.DeclinedWallet, err)
	}
	call.MarkPaid()
	// A caller that takes reports tells of the payment itself (cvm prints
	// "paid N sats to …"): the log says it again only at debug. The
	// logger names the server.
	level := slog.LevelInfo
	if po.Report != nil {
		level = slog.LevelDebug
	}
	call.Logger().Log(ctx, level, "paid", "capability", offer.Capability, "amount", offer.Amount, "unit", offer.Unit, "pmi", offer.PMI)
	p.Report(contextvm.PaymentReport{PaymentOffer: offer, Paid: true, Receipt: receipt})
	return nil
}

// BudgetReason is the CodePaymentDeclined reason (a contextvm.Declined
// constant) of a payments.Budget's refusal err.
func BudgetReason(err error) string {
	switch {
	case errors.Is(err, payments.ErrNoCap):
		return contextvm.DeclinedNoCap
	case errors.Is(err, payments.ErrOverCap):
		return contextvm.DeclinedOverCap
	case errors.Is(err, payments.ErrOverDaily):
		return contextvm.DeclinedOverDaily
	case errors.Is(err, payments.ErrNotAllowed):
		return contextvm.DeclinedNotAllowed
	case errors.Is(err, payments.ErrUnitUnknown):
		return contextvm.DeclinedUnit
	}
	return contextvm.DeclinedWallet
}

// handler is the handler that pays pmi, nil if none.
func (p *Payer) handler(pmi string) payments.Handler {
	for _, h := range p.opts.Handlers {
		if h.PMI() == pmi {
			return h
		}
	}
	return nil
}

// Answered handles explicit gating's answers to call: -32042 (pay, then
// send again) and -32043 (send again later). It reports whether resp was
// one. A -32042 offering again the payment request call paid comes from a
// server that has not seen the payment yet: call is sent again later, as
// on -32043, and nothing is paid twice.
func (p *Payer) Answered(call *contextvm.PaidCall, resp *jsonrpc.Response) bool {
	p.directAnswered(call, resp)
	if p.ch != nil && p.ch.answered(call, resp) {
		call.Go(func(ctx context.Context) { call.Resend(ctx) })
		return true
	}
	if !p.opts.ExplicitGating || resp.Error == nil {
		return false
	}
	if opts, ok := contextvm.IsPaymentRequired(resp.Error); ok {
		if call.PaidFor() && slices.ContainsFunc(opts, func(o payments.PaymentRequired) bool { return o.PayReq == call.Offer().PayReq }) {
			call.RetryLater(pendingRetrySec)
			return true
		}
		if len(opts) == 0 || !call.StartPaying() {
			return false
		}
		req := opts[0]
		for _, o := range opts {
			if p.handler(o.PMI) != nil || p.bearer(o.PMI) != nil {
				req = o
				break
			}
		}
		offer := call.OfferFor(req, "")
		call.Go(func(ctx context.Context) {
			if err := call.Pay(ctx, offer, req); err == nil {
				call.Resend(ctx)
			}
		})
		return true
	}
	var werr *jsonrpc.Error
	if errors.As(resp.Error, &werr) && werr.Code == contextvm.CodePaymentPending && call.PaidFor() {
		var d struct {
			RetryAfter float64 `json:"retry_after"`
		}
		json.Unmarshal(werr.Data, &d)
		call.RetryLater(d.RetryAfter)
		return true
	}
	return false
}
