package contextvm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// PayOptions make a client pay for priced requests (CEP-8). Without them a
// request that a server asks payment for fails at once with
// CodePaymentDeclined, rather than waiting for its timeout.
//
// A payment is made only when all agree: the price is within Budget (its
// per-call cap, which every payment needs, its unit, its allowed servers
// and its daily limits), Confirm approves it, and a Handler for the
// payment method pays it. Until the server answers, the request is kept
// alive: its timeout restarted and, where the caller asked for progress,
// progress notifications telling it a payment is under way.
type PayOptions struct {
	Handlers []payments.Handler
	// Budget holds the per-call cap, the daily limits and the servers
	// allowed to charge. Nil pays nothing.
	Budget *payments.Budget
	// Confirm is asked before each payment within the budget; nil
	// approves.
	Confirm func(ctx context.Context, o PaymentOffer) bool
	// Report, if set, is told of each payment and of what the server said
	// of it.
	Report func(PaymentReport)
	// ExplicitGating asks servers for CEP-8 explicit gating: a priced
	// request is answered -32042 with its payment options, paid, and sent
	// again.
	ExplicitGating bool
}

// PaymentOffer is a server's request for payment of one call.
type PaymentOffer struct {
	Server      string // hex public key
	Method      string
	Capability  string // tool:NAME, prompt:NAME or resource:URI, when known
	Amount      int64
	Unit        string
	PMI         string
	PayReq      string
	Description string
}

// PaymentReport says what became of a payment.
type PaymentReport struct {
	PaymentOffer
	Paid     bool // the handler paid
	Accepted bool // the server said it verified the payment
	Rejected bool // the server said it did not
	Message  string
	Err      error // why it was not paid
	Receipt  payments.Receipt
}

// Reasons in the data of a CodePaymentDeclined answer.
const (
	DeclinedNoPayments = "no-payments" // the client pays nothing (no PayOptions)
	DeclinedNoCap      = "no-cap"
	DeclinedOverCap    = "over-cap"
	DeclinedOverDaily  = "over-daily"
	DeclinedNotAllowed = "not-allowed"
	DeclinedUnit       = "unit"
	DeclinedByPerson   = "declined"
	DeclinedNoHandler  = "no-handler"
	DeclinedWallet     = "wallet"
	DeclinedMalformed  = "malformed"
)

// DeclinedData is the data of a CodePaymentDeclined answer.
type DeclinedData struct {
	Reason string `json:"reason"`
	Amount int64  `json:"amount"`
	Unit   string `json:"unit"`
	PMI    string `json:"pmi,omitempty"`
	Server string `json:"server"`
}

// Declined reads the data of a CodePaymentDeclined error.
func Declined(err error) (DeclinedData, bool) {
	var werr *jsonrpc.Error
	var d DeclinedData
	if !errors.As(err, &werr) || werr.Code != CodePaymentDeclined || json.Unmarshal(werr.Data, &d) != nil {
		return DeclinedData{}, false
	}
	return d, true
}

// ParsePaymentRequired reads the params of notifications/payment_required
// in CEP-8's form {amount, pay_req, pmi, description?, ttl?, _meta?} or in
// seed 000's {amount, currency, invoice, description}. unit is the
// currency when the notification names one, "" otherwise.
func ParsePaymentRequired(params json.RawMessage) (req payments.PaymentRequired, unit string, err error) {
	var w struct {
		Amount      json.Number     `json:"amount"`
		PayReq      string          `json:"pay_req"`
		PMI         string          `json:"pmi"`
		Description string          `json:"description"`
		TTL         json.Number     `json:"ttl"`
		Meta        json.RawMessage `json:"_meta"`
		Currency    string          `json:"currency"`
		Invoice     string          `json:"invoice"`
	}
	d := json.NewDecoder(bytes.NewReader(params))
	d.UseNumber()
	if err := d.Decode(&w); err != nil {
		return req, "", fmt.Errorf("payment_required: %w", err)
	}
	amount, err := wholeAmount(w.Amount)
	if err != nil {
		return req, "", fmt.Errorf("payment_required: amount: %w", err)
	}
	req = payments.PaymentRequired{Amount: amount, PayReq: w.PayReq, PMI: w.PMI, Description: w.Description, Meta: w.Meta}
	if w.TTL != "" {
		if req.TTL, err = wholeAmount(w.TTL); err != nil {
			return req, "", fmt.Errorf("payment_required: ttl: %w", err)
		}
	}
	if req.PayReq == "" {
		req.PayReq = w.Invoice
	}
	if req.PayReq == "" {
		return req, "", errors.New("payment_required: no pay_req or invoice")
	}
	if req.PMI == "" {
		req.PMI = guessPMI(req.PayReq)
	}
	if req.PMI == "" {
		return req, "", fmt.Errorf("payment_required: no pmi, and %.12q… is no payment request a cvm client knows", req.PayReq)
	}
	return req, strings.ToLower(w.Currency), nil
}

// wholeAmount reads a non-negative whole number.
func wholeAmount(n json.Number) (int64, error) {
	if n == "" {
		return 0, errors.New("missing")
	}
	if i, err := n.Int64(); err == nil {
		if i < 0 {
			return 0, fmt.Errorf("%s is negative", n)
		}
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt64/2 {
		return 0, fmt.Errorf("%s is not a whole non-negative number", n)
	}
	return int64(f), nil
}

// guessPMI names the payment method of a payment request given without one
// (seed 000's form): BOLT11 invoices and the Fake method's requests.
func guessPMI(payReq string) string {
	low := strings.ToLower(payReq)
	switch {
	case strings.HasPrefix(low, "lnbc"), strings.HasPrefix(low, "lntb"), strings.HasPrefix(low, "lntbs"), strings.HasPrefix(low, "lnsb"):
		return payments.PMILightningBolt11
	case strings.HasPrefix(low, "fake:"):
		return payments.PMIFake
	}
	return ""
}

// paymentTags are the CEP-8 tags the client sends with its discovery tags.
func (c *clientConn) paymentTags() nostr.Tags {
	if c.opts.Pay != nil && c.opts.Pay.ExplicitGating {
		return nostr.Tags{{TagPaymentInteraction, PaymentExplicitGating}}
	}
	return nil
}

// paymentNotification handles a CEP-8 notification of the server (its
// author is checked before): it reports whether m was one.
func (c *clientConn) paymentNotification(inner nostr.Event, m *jsonrpc.Request) bool {
	switch m.Method {
	case MethodPaymentRequired, MethodPaymentAccepted, MethodPaymentRejected:
	default:
		return false
	}
	ref, _ := firstTagValue(inner.Tags, "e")
	id, err := nostr.IDFromHex(ref)
	var p *pendingRequest
	if err == nil {
		p = c.pending.forEvent(id)
	}
	if p == nil {
		c.log.Info("payment notification for no request in flight; ignored", "method", m.Method, "e", ref)
		return true
	}
	switch m.Method {
	case MethodPaymentRequired:
		req, unit, err := ParsePaymentRequired(m.Params)
		if !p.paying.CompareAndSwap(false, true) {
			c.log.Warn("a second payment request for one call; ignored", "method", p.req.Method)
			return true
		}
		offer := c.offer(p, req, unit)
		if err != nil {
			c.declined(p, offer, DeclinedMalformed, err)
			return true
		}
		c.life.Go(func(ctx context.Context) {
			if _, err := c.pay(ctx, p, offer, req); err != nil {
				return
			}
		})
	case MethodPaymentAccepted:
		p.payMu.Lock()
		handed, paid := p.handed, p.paidFor.Load()
		p.acceptedEarly = handed && !paid
		p.payMu.Unlock()
		switch {
		case paid:
			c.restart(p)
			c.report(PaymentReport{PaymentOffer: p.offer(), Paid: true, Accepted: true})
		case handed:
			// Reported by pay after the payment itself, the order callers
			// read them in.
			c.log.Debug("payment_accepted before the wallet said it paid; reported after it", "method", p.req.Method)
		default:
			c.log.Warn("payment_accepted for a request this client did not pay; ignored", "method", p.req.Method)
		}
	case MethodPaymentRejected:
		msg := mcpmsg.StringParam(m.Params, "message")
		c.report(PaymentReport{PaymentOffer: p.offer(), Paid: p.paidFor.Load(), Rejected: true, Message: msg})
		if c.pending.remove(p) {
			c.fail(p.req.ID, CodePaymentRejected, fmt.Sprintf("contextvm: the server rejected the payment for %s: %s", p.req.Method, msg))
		}
	}
	return true
}

// offer describes the payment req asks for p.
func (c *clientConn) offer(p *pendingRequest, req payments.PaymentRequired, unit string) PaymentOffer {
	o := PaymentOffer{Server: c.server.Hex(), Method: p.req.Method, Amount: req.Amount, Unit: unit, PMI: req.PMI,
		PayReq: req.PayReq, Description: req.Description}
	o.Capability, _ = pricedCapability(p.req)
	if o.Unit == "" {
		o.Unit = DefaultPriceUnit
		for _, pr := range c.view.knownPrices() {
			if pr.Capability == o.Capability && pr.Unit != "" {
				o.Unit = pr.Unit
			}
		}
	}
	return o
}

// pay decides on and makes the payment of offer for p, keeping p alive
// meanwhile. On refusal or failure p is failed with CodePaymentDeclined.
func (c *clientConn) pay(ctx context.Context, p *pendingRequest, offer PaymentOffer, req payments.PaymentRequired) (payments.Receipt, error) {
	p.setOffer(offer)
	stop := c.keepPaying(p, offer)
	defer stop()
	po := c.opts.Pay
	if po == nil {
		return payments.Receipt{}, c.declined(p, offer, DeclinedNoPayments, errors.New("this client makes no payments"))
	}
	if po.Budget == nil {
		return payments.Receipt{}, c.declined(p, offer, DeclinedNoCap, payments.ErrNoCap)
	}
	if err := po.Budget.Check(offer.Server, offer.Amount, offer.Unit); err != nil {
		return payments.Receipt{}, c.declined(p, offer, budgetReason(err), err)
	}
	var h payments.Handler
	for _, cand := range po.Handlers {
		if cand.PMI() == offer.PMI {
			h = cand
			break
		}
	}
	if h == nil {
		return payments.Receipt{}, c.declined(p, offer, DeclinedNoHandler, fmt.Errorf("no wallet here pays %s", offer.PMI))
	}
	if po.Confirm != nil && !po.Confirm(ctx, offer) {
		return payments.Receipt{}, c.declined(p, offer, DeclinedByPerson, errors.New("payment not approved"))
	}
	if err := po.Budget.Reserve(ctx, offer.Server, offer.Amount, offer.Unit); err != nil {
		return payments.Receipt{}, c.declined(p, offer, budgetReason(err), err)
	}
	if !c.pending.isPending(p) {
		po.Budget.Refund(context.WithoutCancel(ctx), offer.Server, offer.Amount)
		return payments.Receipt{}, errors.New("the request ended before it was paid")
	}
	p.payMu.Lock()
	p.handed = true
	p.payMu.Unlock()
	receipt, err := h.Pay(ctx, req, offer.Amount)
	if err != nil {
		if rerr := po.Budget.Refund(context.WithoutCancel(ctx), offer.Server, offer.Amount); rerr != nil {
			c.log.Warn("could not give back an unspent budget reservation", "err", rerr)
		}
		return payments.Receipt{}, c.declined(p, offer, DeclinedWallet, err)
	}
	p.payMu.Lock()
	p.paidFor.Store(true)
	acceptedEarly := p.acceptedEarly
	p.payMu.Unlock()
	// A caller that takes reports tells of the payment itself (cvm prints
	// "paid N sats to …"): the log says it again only at debug. The
	// logger names the server.
	level := slog.LevelInfo
	if po.Report != nil {
		level = slog.LevelDebug
	}
	c.log.Log(ctx, level, "paid", "capability", offer.Capability, "amount", offer.Amount, "unit", offer.Unit, "pmi", offer.PMI)
	c.report(PaymentReport{PaymentOffer: offer, Paid: true, Receipt: receipt})
	c.restart(p)
	if acceptedEarly {
		c.report(PaymentReport{PaymentOffer: offer, Paid: true, Accepted: true})
	}
	return receipt, nil
}

func budgetReason(err error) string {
	switch {
	case errors.Is(err, payments.ErrNoCap):
		return DeclinedNoCap
	case errors.Is(err, payments.ErrOverCap):
		return DeclinedOverCap
	case errors.Is(err, payments.ErrOverDaily):
		return DeclinedOverDaily
	case errors.Is(err, payments.ErrNotAllowed):
		return DeclinedNotAllowed
	case errors.Is(err, payments.ErrUnitUnknown):
		return DeclinedUnit
	}
	return DeclinedWallet
}

// declined fails p with CodePaymentDeclined and returns err.
func (c *clientConn) declined(p *pendingRequest, offer PaymentOffer, reason string, err error) error {
	c.report(PaymentReport{PaymentOffer: offer, Err: err})
	if c.pending.remove(p) {
		// Withdrawn first: the caller, told next, may close the connection
		// at once, and Close waits for a withdrawal under way.
		c.withdraw(p, reason)
		data, _ := json.Marshal(DeclinedData{Reason: reason, Amount: offer.Amount, Unit: offer.Unit, PMI: offer.PMI, Server: offer.Server})
		c.deliver(&jsonrpc.Response{ID: p.req.ID, Error: &jsonrpc.Error{Code: CodePaymentDeclined,
			Message: fmt.Sprintf("contextvm: %s costs %d %s and was not paid: %v", offer.what(), offer.Amount, offer.Unit, err), Data: data}})
	}
	return err
}

// withdrawWait bounds the sending of a withdrawal. It is sent even when the
// connection closes meanwhile, as a one-shot command's does as soon as its
// call is refused: Close waits for it this long rather than cancel it,
// since a server not told would wait for the payment until the payment
// request expires. A relay's OK takes milliseconds; a relay that does not
// answer must not hold the command for long.
const withdrawWait = 2 * time.Second

// withdraw cancels p on the server (notifications/cancelled), which would
// otherwise wait for its payment until the payment request expires (5
// minutes, typically). Under explicit gating the server has answered
// already and waits for nothing.
func (c *clientConn) withdraw(p *pendingRequest, reason string) {
	if c.opts.Pay != nil && c.opts.Pay.ExplicitGating {
		return
	}
	n := mcpmsg.Cancelled(p.wire.ID, "payment declined: "+reason)
	c.life.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawWait)
		defer cancel()
		c.writeNotification(ctx, n)
	})
}

func (o PaymentOffer) what() string {
	if o.Capability != "" {
		return o.Capability
	}
	return o.Method
}

func (c *clientConn) report(r PaymentReport) {
	if c.opts.Pay != nil && c.opts.Pay.Report != nil {
		c.opts.Pay.Report(r)
	}
}

// restart restarts p's timeout.
func (c *clientConn) restart(p *pendingRequest) {
	if c.opts.RequestTimeout > 0 {
		c.pending.restart(p, c.opts.RequestTimeout)
	}
}

// keepPaying keeps p alive while its payment is under way: its timeout
// restarted now and every half timeout, and the caller, if it asked for
// progress, told. stop ends it.
func (c *clientConn) keepPaying(p *pendingRequest, offer PaymentOffer) (stop func()) {
	c.restart(p)
	c.progress(p, fmt.Sprintf("payment of %d %s required for %s", offer.Amount, offer.Unit, offer.what()))
	if c.opts.RequestTimeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	if !c.life.Go(func(ctx context.Context) {
		defer close(ended)
		t := time.NewTicker(c.opts.RequestTimeout / 2)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.restart(p)
				c.progress(p, "payment under way")
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}) {
		return func() {}
	}
	return func() { close(done); <-ended }
}

// progress tells the caller of p, if it asked for progress, what its
// request is waiting for.
func (c *clientConn) progress(p *pendingRequest, message string) {
	if p.token.IsZero() || p.injected() {
		return
	}
	params, _ := json.Marshal(map[string]any{"progressToken": p.token, "progress": 0, "message": message})
	select {
	case c.incoming <- &jsonrpc.Request{Method: mcpmsg.MethodProgress, Params: params}:
	default: // the caller is not reading; the restarted timer is what matters
	}
}

// gatedAnswer handles explicit gating's answers to p: -32042 (pay, then
// send again) and -32043 (send again later). It reports whether m was one.
// A -32042 offering again the payment request p paid comes from a server
// that has not seen the payment yet: p is sent again later, as on -32043,
// and nothing is paid twice.
func (c *clientConn) gatedAnswer(p *pendingRequest, m *jsonrpc.Response) bool {
	if c.opts.Pay == nil || !c.opts.Pay.ExplicitGating {
		return false
	}
	if opts, ok := IsPaymentRequired(m.Error); ok {
		if p.paidFor.Load() && slices.ContainsFunc(opts, func(o payments.PaymentRequired) bool { return o.PayReq == p.offer().PayReq }) {
			c.retryLater(p, pendingRetrySec)
			return true
		}
		if len(opts) == 0 || !p.paying.CompareAndSwap(false, true) {
			return false
		}
		req := opts[0]
		for _, o := range opts {
			if c.hasHandler(o.PMI) {
				req = o
				break
			}
		}
		offer := c.offer(p, req, "")
		c.life.Go(func(ctx context.Context) {
			if _, err := c.pay(ctx, p, offer, req); err == nil {
				c.resend(ctx, p)
			}
		})
		return true
	}
	var werr *jsonrpc.Error
	if errors.As(m.Error, &werr) && werr.Code == CodePaymentPending && p.paidFor.Load() {
		var d struct {
			RetryAfter float64 `json:"retry_after"`
		}
		json.Unmarshal(werr.Data, &d)
		c.retryLater(p, d.RetryAfter)
		return true
	}
	return false
}

// retryLater sends p again after retryAfter seconds (between 0.1 and 30),
// its timeout restarted meanwhile.
func (c *clientConn) retryLater(p *pendingRequest, retryAfter float64) {
	wait := min(max(time.Duration(retryAfter*float64(time.Second)), 100*time.Millisecond), 30*time.Second)
	c.restart(p)
	c.life.AfterFunc(wait, func(ctx context.Context) { c.resend(ctx, p) })
}

func (c *clientConn) hasHandler(pmi string) bool {
	if c.opts.Pay == nil {
		return false
	}
	for _, h := range c.opts.Pay.Handlers {
		if h.PMI() == pmi {
			return true
		}
	}
	return false
}

// resend sends p again as a new event (explicit gating's "send the same
// request again").
func (c *clientConn) resend(ctx context.Context, p *pendingRequest) {
	if !c.pending.isPending(p) {
		return
	}
	content, err := EncodeContent(p.wire)
	if err != nil {
		return
	}
	tags := append(nostr.Tags{{"p", c.server.Hex()}}, c.paymentTags()...)
	if _, err := c.sendTracked(ctx, p, content, tags, c.wrapKind()); err != nil && !errors.Is(err, nostrx.ErrUnheard) && c.pending.remove(p) {
		c.fail(p.req.ID, CodeTransportError, fmt.Sprintf("contextvm: %s not delivered after its payment: %v", p.req.Method, err))
	}
}
