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

// Methods and tags of CEP-8 payments.
const (
	MethodPaymentRequired = "notifications/payment_required"
	MethodPaymentAccepted = "notifications/payment_accepted"
	MethodPaymentRejected = "notifications/payment_rejected"

	TagPMI                = "pmi"
	TagPaymentInteraction = "payment_interaction"

	PaymentTransparent    = "transparent"
	PaymentExplicitGating = "explicit_gating"
)

// A Payer pays for the priced requests of a client (CEP-8):
// ClientOptions.Payer. Package contextvm/cep8 has one that pays through
// payments.Handler rails within a payments.Budget. A client without one
// pays nothing: a request a server asks payment for fails at once with
// CodePaymentDeclined (DeclinedNoPayments), rather than waiting for its
// timeout, and the server is told to stop waiting for the payment.
//
// Its methods are called from the connection's goroutines, possibly at
// the same time.
type Payer interface {
	// Tags are added to a request (call) as it is sent: with the
	// discovery tags of a session's first message (discovery true:
	// CEP-8's payment_interaction goes there), and on the request sent
	// again after its payment (true) or after a busy answer (false). A
	// payment that travels with the request itself goes here too (a
	// payment channel's receipt), made afresh each time it is sent.
	Tags(call *PaidCall, discovery bool) nostr.Tags
	// Pay decides on, and makes, the payment offer that the server asked
	// for call with req, while the client keeps call alive. It returns
	// nil once paid (call.MarkPaid), or the error of call.Decline.
	Pay(ctx context.Context, call *PaidCall, offer PaymentOffer, req payments.PaymentRequired) error
	// Report is told of each payment made or declined, and of what the
	// server said of it.
	Report(r PaymentReport)
	// Answered is shown each answer to call, a result or an error, before
	// the caller: it may read what the server says of the payment (a
	// payment channel's state), and it may take an error answer: true if
	// it did, and answers call or sends it again itself (CEP-8's explicit
	// gating: -32042 with payment options, -32043 pending; a refused
	// channel receipt). A result is never taken.
	Answered(call *PaidCall, resp *jsonrpc.Response) bool
}

// A NoticePayer is a Payer that reads CEP-8's payment notifications before
// the client acts on them (an optional interface, found by type
// assertion): what becomes of a direct payment, which travels with the
// request (CEP-8's direct_payment tag) and is never asked for, is told by
// them alone: payment_accepted may carry change tags, to keep, and
// payment_rejected means the bearer payload is the client's again, while
// the request goes on in the normal flow.
type NoticePayer interface {
	// Notice is shown each payment notification of the server, on the
	// connection's reader (it must not block for long), before the client
	// acts on it. call is the request it names, nil when none is in
	// flight (change a server sends again after its call ended). It
	// reports whether it took the notification: the client then does
	// nothing more with it.
	Notice(call *PaidCall, n PaymentNotice) bool
}

// PaymentNotice is a CEP-8 payment notification of a server.
type PaymentNotice struct {
	Method  string
	Params  json.RawMessage
	Tags    nostr.Tags   // the event's: change tags, among others
	Request nostr.ID     // the request event it names (its e tag)
	Server  nostr.PubKey // who sent it
	Logger  *slog.Logger // the connection's, which names the server
}

// explicitPayer is a Payer that asked servers for explicit gating: a server
// that serves it so answers -32042 and waits for nothing, so a declined
// payment needs no withdrawal.
type explicitPayer interface {
	ExplicitGating() bool
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
	DeclinedNoPayments = "no-payments" // the client pays nothing (no Payer)
	DeclinedNoCap      = "no-cap"
	DeclinedOverCap    = "over-cap"
	DeclinedOverDaily  = "over-daily"
	DeclinedNotAllowed = "not-allowed"
	DeclinedUnit       = "unit"
	DeclinedByPerson   = "declined"
	DeclinedNoHandler  = "no-handler"
	DeclinedWallet     = "wallet"
	DeclinedMalformed  = "malformed"
	// DeclinedNoRate: the price is in usd and the client has no usd rate
	// (none configured, or its source failed) to check the amount asked.
	DeclinedNoRate = "no-rate"
	// DeclinedOverRate: the amount asked for a usd price is more than the
	// client's tolerance above the price at its own rate.
	DeclinedOverRate = "over-rate"
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
		req.PMI = payments.GuessPMI(req.PayReq)
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

// paymentTags are the tags of the client's Payer for p.
func (c *clientConn) paymentTags(p *pendingRequest, discovery bool) nostr.Tags {
	if c.opts.Payer == nil {
		return nil
	}
	return c.opts.Payer.Tags(&PaidCall{c: c, p: p}, discovery)
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
	if np, ok := c.opts.Payer.(NoticePayer); ok {
		var call *PaidCall
		if p != nil {
			call = &PaidCall{c: c, p: p}
		}
		if np.Notice(call, PaymentNotice{Method: m.Method, Params: m.Params, Tags: inner.Tags, Request: id, Server: c.server, Logger: c.log}) {
			return true
		}
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
		c.life.Go(func(ctx context.Context) { c.pay(ctx, p, offer, req) })
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
	o.Capability, _ = PricedCapability(p.req)
	if o.Unit == "" {
		o.Unit = DefaultPriceUnit
		for _, pr := range c.view.knownPrices() {
			// A price in usd is asked for in sats, converted at the
			// server's rate (docs/protocol-compatibility.md).
			if pr.Capability == o.Capability && pr.Unit != "" && pr.Unit != payments.UnitUSD {
				o.Unit = pr.Unit
			}
		}
	}
	return o
}

// pay has the client's Payer decide on and make the payment of offer for
// p, keeping p alive meanwhile. On refusal or failure p is failed with
// CodePaymentDeclined.
func (c *clientConn) pay(ctx context.Context, p *pendingRequest, offer PaymentOffer, req payments.PaymentRequired) error {
	p.setOffer(offer)
	stop := c.keepPaying(p, offer)
	defer stop()
	if c.opts.Payer == nil {
		return c.declined(p, offer, DeclinedNoPayments, errors.New("this client makes no payments"))
	}
	if err := c.opts.Payer.Pay(ctx, &PaidCall{c: c, p: p}, offer, req); err != nil {
		return err
	}
	p.payMu.Lock()
	acceptedEarly := p.acceptedEarly
	p.payMu.Unlock()
	c.restart(p)
	if acceptedEarly {
		c.report(PaymentReport{PaymentOffer: offer, Paid: true, Accepted: true})
	}
	return nil
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
	if e, ok := c.opts.Payer.(explicitPayer); ok && e.ExplicitGating() {
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
	if c.opts.Payer != nil {
		c.opts.Payer.Report(r)
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

// A PaidCall is a request of a client in flight, as its Payer sees it.
type PaidCall struct {
	c *clientConn
	p *pendingRequest
}

// Request is the request, as the go-sdk client wrote it.
func (k *PaidCall) Request() *jsonrpc.Request { return k.p.req }

// Logger is the connection's logger, which names the server.
func (k *PaidCall) Logger() *slog.Logger { return k.c.log }

// Pending reports whether the request still waits for its answer.
func (k *PaidCall) Pending() bool { return k.c.pending.isPending(k.p) }

// StartPaying reports whether no payment was asked for the request yet,
// and marks it asked for: one payment per request.
func (k *PaidCall) StartPaying() bool { return k.p.paying.CompareAndSwap(false, true) }

// Handing records that the payment is about to go to the wallet. The
// server may see it settle, and send payment_accepted, before the wallet
// answers: an acceptance after Handing is kept and reported once Pay
// returns, after the payment itself.
func (k *PaidCall) Handing() {
	k.p.payMu.Lock()
	k.p.handed = true
	k.p.payMu.Unlock()
}

// MarkPaid records that the request was paid for.
func (k *PaidCall) MarkPaid() {
	k.p.payMu.Lock()
	k.p.paidFor.Store(true)
	k.p.payMu.Unlock()
}

// PaidFor reports whether the request was paid for.
func (k *PaidCall) PaidFor() bool { return k.p.paidFor.Load() }

// ServerPMIs are the payment methods the server's discovery tags listed
// in this session (CEP-8's pmi tags), in its order of preference.
func (k *PaidCall) ServerPMIs() []string {
	v := &k.c.view
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.caps.pmis)
}

// Price is the price the server listed for the request's capability
// (CEP-8's cap tags on its list answers), if the client has seen one.
func (k *PaidCall) Price() (Price, bool) {
	capability, ok := PricedCapability(k.p.req)
	if !ok {
		return Price{}, false
	}
	for _, pr := range k.c.view.knownPrices() {
		if pr.Capability == capability {
			return pr, true
		}
	}
	return Price{}, false
}

// Server is the server's public key.
func (k *PaidCall) Server() nostr.PubKey { return k.c.server }

// Resent is how many times the request was sent again (Resend,
// RetryLater) after its first answer.
func (k *PaidCall) Resent() int { return int(k.p.resent.Load()) }

// Offer is the payment last offered for the request.
func (k *PaidCall) Offer() PaymentOffer { return k.p.offer() }

// OfferFor describes the payment req asks for the request, in unit (""
// when the server named none: the unit of the price it listed, or
// DefaultPriceUnit).
func (k *PaidCall) OfferFor(req payments.PaymentRequired, unit string) PaymentOffer {
	return k.c.offer(k.p, req, unit)
}

// Pay has the client's Payer pay offer for the request, keeping it alive
// meanwhile, as for a payment_required notification.
func (k *PaidCall) Pay(ctx context.Context, offer PaymentOffer, req payments.PaymentRequired) error {
	return k.c.pay(ctx, k.p, offer, req)
}

// Decline fails the request with CodePaymentDeclined, reason (one of the
// Declined constants) and err, after telling the Payer's Report and the
// server; it returns err.
func (k *PaidCall) Decline(offer PaymentOffer, reason string, err error) error {
	return k.c.declined(k.p, offer, reason, err)
}

// Go runs f on a goroutine of the connection.
func (k *PaidCall) Go(f func(ctx context.Context)) { k.c.life.Go(f) }

// RetryLater sends the request again after retryAfter seconds (between
// 0.1 and 30), its timeout restarted meanwhile.
func (k *PaidCall) RetryLater(retryAfter float64) {
	c, p := k.c, k.p
	wait := min(max(time.Duration(retryAfter*float64(time.Second)), 100*time.Millisecond), 30*time.Second)
	c.restart(p)
	c.life.AfterFunc(wait, func(ctx context.Context) { c.resend(ctx, p) })
}

// Resend sends the request again as a new event, with the Payer's tags
// (explicit gating's "send the same request again").
func (k *PaidCall) Resend(ctx context.Context) { k.c.resend(ctx, k.p) }

// resend sends p again as a new event, with the Payer's tags.
func (c *clientConn) resend(ctx context.Context, p *pendingRequest) {
	if !c.pending.isPending(p) {
		return
	}
	p.resent.Add(1)
	content, err := EncodeContent(p.wire)
	if err != nil {
		return
	}
	tags := append(nostr.Tags{{"p", c.server.Hex()}}, c.paymentTags(p, true)...)
	if _, err := c.sendTracked(ctx, p, content, tags, c.wrapKind()); err != nil && !errors.Is(err, nostrx.ErrUnheard) && c.pending.remove(p) {
		c.fail(p.req.ID, CodeTransportError, fmt.Sprintf("contextvm: %s not delivered after its payment: %v", p.req.Method, err))
	}
}

// IsPaymentRequired tells CEP-8's -32042 Payment Required (with
// data.payment_options) from MCP's -32042 URLElicitationRequired (with
// data.elicitations), and returns the payment options.
func IsPaymentRequired(err error) ([]payments.PaymentRequired, bool) {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodePaymentRequired {
		return nil, false
	}
	var d struct {
		Options []payments.PaymentRequired `json:"payment_options"`
	}
	if json.Unmarshal(werr.Data, &d) != nil || d.Options == nil {
		return nil, false
	}
	return d.Options, true
}
