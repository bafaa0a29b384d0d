package quotation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The buyer's side of prepaid payment channels over HTTP: with
// Pay.Channel and Signer set, Transport pays the priced calls that pass
// through it by receipt, over one channel with the endpoint that it opens
// (a quoted, paid and confirmed deposit), tops up and resynchronises from
// every answer.

// buyerChannelSpace is the Buyer's durable space (Pay.Channel.Store): its
// channel with an endpoint, as NIP-4's answer payload of the endpoint's
// last word on it, by endpoint URL.
const buyerChannelSpace = "nip10.channels"

// buyerChannelKeep is how long a channel's state is kept after its last
// use, as the server keeps a closed channel.
const buyerChannelKeep = 400 * 24 * time.Hour

// fundRetry is how long a funding that failed (declined, the wallet
// failed) holds back the next: meanwhile priced calls pay invoices.
const fundRetry = 10 * time.Minute

// maxTries bounds the sends of one call by receipt: a refusal carries the
// state to make the next receipt from, and calls racing on the channel
// may need more than one.
const maxTries = 4

// buyerChannel is a Buyer's channel with its endpoint.
type buyerChannel struct {
	b     *Buyer
	store durable.Store

	mu     sync.Mutex
	loaded bool
	client *channel.Client   // nil: no channel
	costs  map[string]uint64 // msat, by tool: the last cost the server named

	fundMu sync.Mutex // one funding (open, top-up) at a time
	failed time.Time  // when the last funding failed
}

// errNoChannel is a call that goes without a receipt: its price is paid
// by quotation instead.
var errNoChannel = errors.New("no channel for this call")

// ByChannel reports whether the buyer pays priced calls by channel first
// (Pay.Channel with a deposit, and a Signer): the calls are then sent as
// they are, through Transport, which attaches receipts; a call answered
// CodeQuotationRequired all the same is for Buy.
func (b *Buyer) ByChannel() bool {
	return b.Pay != nil && b.Pay.Channel != nil && b.Pay.Channel.DepositSats > 0 && b.Signer != nil
}

func (b *Buyer) channel() *buyerChannel {
	b.chOnce.Do(func() {
		st := b.Pay.Channel.Store
		if st == nil {
			st = durable.NewMemory(durable.Options{})
		}
		b.ch = &buyerChannel{b: b, store: st, costs: map[string]uint64{}}
	})
	return b.ch
}

// Transport returns a RoundTripper that sends through next (which signs
// the requests: the receipts' channel is the signing key's) and pays the
// priced tools/calls it carries by channel when ByChannel, else next
// itself. A call is priced when the server said so: its answer named the
// call's cost, or refused the call without a receipt with
// CodeQuotationRequired naming channel.PMI; the call is then sent again
// with a receipt, once the channel is open. A receipt the server refuses
// is made again from the state it answers with, and sent again; a refusal
// that stands reaches the caller as a JSON-RPC error
// (cep8.CodeChannelRefused, data NIP-4's error payload), never as an HTTP
// error, which would end an MCP session.
func (b *Buyer) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if !b.ByChannel() {
		return next
	}
	return &channelTransport{ch: b.channel(), next: next}
}

type channelTransport struct {
	ch   *buyerChannel
	next http.RoundTripper
}

func (t *channelTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil || req.Body == http.NoBody || req.Header.Get(channel.Header) != "" {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("quotation: read request body: %w", err)
	}
	name, id, ok := toolCall(body)
	if !ok {
		return t.next.RoundTrip(withBody(req, body, ""))
	}
	return t.ch.call(req, body, name, id, t.next)
}

// toolCall reads a request body that is one tools/call naming no
// quotation: its tool and JSON-RPC id.
func toolCall(body []byte) (name string, id jsonrpc.ID, ok bool) {
	if !bytes.Contains(body, []byte(`"tools/call"`)) {
		return "", id, false
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, isReq := msg.(*jsonrpc.Request)
	if err != nil || !isReq || !req.IsCall() || req.Method != "tools/call" {
		return "", id, false
	}
	name, _, quotation, err := callParams(req.Params)
	if err != nil || quotation != "" {
		return "", id, false
	}
	return name, req.ID, true
}

// withBody is a copy of req with body, and the receipt header h if any.
func withBody(req *http.Request, body []byte, h string) *http.Request {
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	if h != "" {
		out.Header.Set(channel.Header, h)
	}
	return out
}

// call sends the call of tool name (JSON-RPC id) in req, by receipt when
// its cost is known.
func (c *buyerChannel) call(req *http.Request, body []byte, name string, id jsonrpc.ID, next http.RoundTripper) (*http.Response, error) {
	ctx := req.Context()
	if c.b.price(name).Unit == payments.UnitUSD {
		// A channel pays prices in sats (a gateway refuses a receipt for
		// a usd price): a usd-priced call goes as it is, to be bought by
		// quotation, which holds it to the client's rate. A receipt would
		// be held to the budget only.
		return next.RoundTrip(withBody(req, body, ""))
	}
	cost, known := c.cost(name)
	for try := 1; ; try++ {
		h := ""
		if known {
			var err error
			if h, err = c.receipt(ctx, cost); err != nil {
				// Sent as it is: the server asks for a quotation, which
				// the caller buys (or declines).
				c.b.logger().Info("a priced call goes without a channel", "tool", name, "err", err)
				return next.RoundTrip(withBody(req, body, ""))
			}
		}
		resp, err := next.RoundTrip(withBody(req, body, h))
		if err != nil {
			return nil, err // the receipt counts as sent: a refusal resynchronises
		}
		if h == "" {
			price, offered := channelOffer(resp)
			if !offered || try > 1 {
				return resp, nil
			}
			resp.Body.Close()
			cost, known = price, true
			continue
		}
		v := resp.Header.Get(channel.Header)
		if v == "" {
			return resp, nil // not the channel's answer (a DIDAuthV1 refusal, …)
		}
		p, err := channel.DecodeHeader(v)
		if err != nil {
			c.b.logger().Warn("the server's channel state cannot be read", "err", err)
			return resp, nil
		}
		resend := c.answered(name, &p)
		if resp.StatusCode < 300 || p.Error == nil {
			return resp, nil
		}
		if p.Error.Code == channel.CodeClosed {
			c.claimRefund(ctx, &p)
		}
		resp.Body.Close()
		if !resend || try >= maxTries {
			return refusal(resp, id, &p), nil
		}
		if p.Cost > 0 {
			cost = uint64(p.Cost)
		}
	}
}

// claimRefund has the refund of the channel the server closed (idle past
// its TTL; p is the refusal saying so) paid, now that the buyer hears of
// it: its next contact. A refund that fails is logged; the channel is
// forgotten all the same, and the call goes on over another.
func (c *buyerChannel) claimRefund(ctx context.Context, p *channel.Payload) {
	st, err := channel.StateOf(p)
	if err != nil || st.Owed == 0 {
		return
	}
	if c.b.Pay.Channel.Wallet == nil {
		c.b.logger().Warn("the server closed a channel with money left in it, which stays owed: Pay.Channel.Wallet invoices refunds", "channel", st.Channel, "owed_msat", st.Owed)
		return
	}
	if _, err := c.b.closeChannel(ctx, st); err != nil {
		c.b.logger().Warn("the server closed a channel and its refund could not be claimed", "channel", st.Channel, "owed_msat", st.Owed, "err", err)
	}
}

// channelOffer reads a CodeQuotationRequired answer whose data names
// channel.PMI and a fixed price in sats: the call's cost, in msat. The
// body stays readable.
func channelOffer(resp *http.Response) (uint64, bool) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || ct != "application/json" {
		return 0, false
	}
	// A refusal is small: what is longer is another answer, passed on
	// whole, what was read first.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(raw), resp.Body), resp.Body}
	if err != nil || len(raw) == maxAnswerBytes || !bytes.Contains(raw, []byte(DataChannelPMI)) {
		return 0, false
	}
	var r struct {
		Error *struct {
			Code int64 `json:"code"`
			Data struct {
				// Whole sats: a fraction does not decode, and is no
				// channel's price.
				Price struct {
					Amount int64  `json:"amount"`
					Max    int64  `json:"max"`
					Unit   string `json:"unit"`
				} `json:"price"`
				ChannelPMI string `json:"channel_pmi"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Error == nil || r.Error.Code != CodeQuotationRequired {
		return 0, false
	}
	d := r.Error.Data
	if d.ChannelPMI != channel.PMI || d.Price.Unit != contextvm.DefaultPriceUnit || d.Price.Max > d.Price.Amount || d.Price.Amount <= 0 {
		return 0, false
	}
	return uint64(d.Price.Amount) * 1000, true
}

// readCloser reads what its Reader gives and closes its Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// refusal is the answer the caller gets for a receipt refused for good: a
// JSON-RPC error, cep8.CodeChannelRefused with the error payload as data,
// as over ContextVM.
func refusal(resp *http.Response, id jsonrpc.ID, p *channel.Payload) *http.Response {
	data, _ := channel.MarshalPayload(p)
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code: cep8.CodeChannelRefused, Message: fmt.Sprintf("channel: %s: %s", p.Error.Code, p.Error.Message), Data: data}})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(channel.Header, resp.Header.Get(channel.Header))
	return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: resp.Request}
}

func (c *buyerChannel) cost(name string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.costs[name]
	return v, ok
}

// clientLocked is the channel, loaded from the store once; c.mu held.
func (c *buyerChannel) clientLocked(ctx context.Context) *channel.Client {
	if c.loaded {
		return c.client
	}
	c.loaded = true
	if s, ok := openChannel(ctx, c.store, c.b.URL); ok {
		c.client = channel.NewClient(s)
	}
	return c.client
}

// receipt is the header value that pays cost (msat) by channel: the
// next receipt, signed, once the channel is open and its deposit covers
// cost (funding it first if need be).
func (c *buyerChannel) receipt(ctx context.Context, cost uint64) (string, error) {
	po := c.b.Pay
	if po.Budget == nil || cost > uint64(max(po.Budget.PerCall, 0))*1000 {
		return "", fmt.Errorf("%w: the call costs %d msat, above the per-call cap", errNoChannel, cost)
	}
	for try := 0; ; try++ {
		c.mu.Lock()
		cl := c.clientLocked(ctx)
		var r channel.SubRAV
		err := errNoChannel
		if cl != nil {
			r, err = cl.Pay(cost)
		}
		var st channel.State
		if cl != nil {
			st = cl.State()
		}
		c.mu.Unlock()
		switch {
		case err == nil:
			signed, err := channel.Sign(ctx, c.b.Signer, r)
			if err != nil {
				return "", err
			}
			return channel.EncodeHeader(&channel.Payload{Version: channel.Version, ClientTxRef: rand.Text(), SignedSubRAV: &signed})
		case try > 0:
			return "", err
		case errors.Is(err, errNoChannel), errors.Is(err, channel.ErrClosed):
			err = c.fund(ctx, cl, channel.ID{}, cost)
		case errors.Is(err, channel.ErrInsufficientFunds):
			err = c.fund(ctx, cl, st.Channel, cost)
		}
		if err != nil {
			return "", err
		}
	}
}

// fund opens a channel (topUp zero) or tops up channel topUp, with the
// deposit of Pay.Channel, unless another call funded it meanwhile (the
// channel is no longer was): quote the deposit, pay it as a deposit
// (within the daily limits, not the per-call cap), confirm it.
func (c *buyerChannel) fund(ctx context.Context, was *channel.Client, topUp channel.ID, cost uint64) error {
	c.fundMu.Lock()
	defer c.fundMu.Unlock()
	c.mu.Lock()
	now, failed := c.clientLocked(ctx), c.failed
	c.mu.Unlock()
	if now != was {
		return nil
	}
	if time.Since(failed) < fundRetry {
		return fmt.Errorf("%w: the last funding failed %s ago", errNoChannel, time.Since(failed).Round(time.Second))
	}
	err := c.deposit(ctx, topUp, cost)
	if err != nil {
		c.mu.Lock()
		c.failed = time.Now()
		c.mu.Unlock()
	}
	return err
}

func (c *buyerChannel) deposit(ctx context.Context, topUp channel.ID, cost uint64) error {
	b := c.b
	amount := uint64(b.Pay.Channel.DepositSats) * 1000
	if amount < cost {
		return fmt.Errorf("%w: a deposit of %d sats does not cover a call of %d msat", errNoChannel, b.Pay.Channel.DepositSats, cost)
	}
	var dp depositParams
	dp.Channel = &struct {
		Deposit channel.Amount `json:"deposit"`
		ID      string         `json:"id,omitempty"`
	}{Deposit: channel.Amount(amount)}
	what := "channel deposit"
	if topUp != (channel.ID{}) {
		dp.Channel.ID, what = topUp.String(), "channel top-up"
	}
	var q Quote
	if err := b.rpc(ctx, MethodQuote, dp, &q); err != nil {
		return fmt.Errorf("nip10/quote for a %s: %w", what, err)
	}
	if q.Price.Unit != contextvm.DefaultPriceUnit || q.Price.Amount != b.Pay.Channel.DepositSats {
		return fmt.Errorf("the server asked %d %s for a %s of %d sats", q.Price.Amount, q.Price.Unit, what, b.Pay.Channel.DepositSats)
	}
	offer := contextvm.PaymentOffer{Server: b.URL, Method: "tools/call", Capability: what,
		Amount: q.Price.Amount, Unit: q.Price.Unit, PMI: q.Instructions.PMI, PayReq: q.Instructions.PayReq}
	receipt, err := b.payAs(ctx, offer, contextvm.Price{}, true)
	if err != nil {
		return err
	}
	var res confirmResult
	if err := b.rpc(ctx, MethodConfirm, map[string]any{"quotation_id": q.ID, "payment_proof": receipt.Preimage}, &res); err != nil {
		b.report(contextvm.PaymentReport{PaymentOffer: offer, Rejected: true, Message: err.Error()})
		return fmt.Errorf("paid %d sats for a %s, but the server did not confirm it (quotation %s; confirming it again opens the channel): %w", q.Price.Amount, what, q.ID, err)
	}
	b.report(contextvm.PaymentReport{PaymentOffer: offer, Accepted: true})
	p, err := channel.UnmarshalPayload(res.Channel)
	if err != nil {
		return fmt.Errorf("the server's channel after a %s: %w", what, err)
	}
	if c.answered("", &p) {
		return fmt.Errorf("the server refused the %s: %s", what, p.Error.Message)
	}
	return nil
}

// answered takes the server's word on the channel, an answer's or a
// refusal's payload (tool names the call, "" for none), and reports
// whether a refused call is worth sending again with a new receipt.
func (c *buyerChannel) answered(tool string, p *channel.Payload) (resend bool) {
	ctx := context.Background()
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Cost > 0 && tool != "" {
		c.costs[tool] = uint64(p.Cost)
	}
	var code channel.Code
	if p.Error != nil {
		code = p.Error.Code
	}
	switch code {
	case "", channel.CodeConflict, channel.CodeDuplicate, channel.CodeInsufficientFunds, channel.CodeEpochMismatch, channel.CodeTampered:
	case channel.CodeNotFound, channel.CodeClosed:
		c.loaded, c.client = true, nil
		c.store.Put(ctx, buyerChannelSpace, []byte(c.b.URL), nil, time.Now())
		return true
	default:
		return false
	}
	if p.SubRAV == nil {
		return false
	}
	s, err := channel.StateOf(p)
	if err != nil {
		c.b.logger().Warn("the server's channel state cannot be read", "err", err)
		return false
	}
	c.keepLocked(ctx, s)
	return code != ""
}

// keepLocked takes s, the server's state of the channel, as the buyer's,
// and stores it; c.mu held.
func (c *buyerChannel) keepLocked(ctx context.Context, s channel.State) {
	if c.client == nil || c.client.State().Channel != s.Channel {
		c.client = channel.NewClient(s)
	} else if c.client.Resync(s) != nil {
		return
	}
	c.loaded = true
	p := s.Answer(0)
	if b, err := channel.MarshalPayload(&p); err == nil {
		err := c.store.Put(ctx, buyerChannelSpace, []byte(c.b.URL), b, time.Now().Add(buyerChannelKeep))
		if err == nil {
			err = updateEndpoint(ctx, c.store, c.b.URL, func(rec *endpointRecord) { used(rec, s, time.Now()) })
		}
		if err != nil {
			c.b.logger().Warn("could not keep the channel's state", "err", err)
		}
	}
}

// Channel returns the buyer's channel with its endpoint as it knows it
// (the server's last word, and the receipts sent since); false if there
// is none, or no Pay.Channel to keep one in.
func (b *Buyer) Channel(ctx context.Context) (channel.State, bool) {
	if b.Pay == nil || b.Pay.Channel == nil {
		return channel.State{}, false
	}
	c := b.channel()
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.clientLocked(ctx)
	if cl == nil {
		return channel.State{}, false
	}
	return cl.State(), true
}

// CloseChannel closes the buyer's channel with its endpoint and has the
// server pay back what it did not spend, to an invoice made by
// Pay.Channel.Wallet (cep8.MethodChannelClose, as over ContextVM). It
// returns the closed channel's state, with what was refunded (Owed). A
// refund interrupted (a crash, a timeout) is completed by closing again:
// the server pays the invoice it recorded, once.
func (b *Buyer) CloseChannel(ctx context.Context) (channel.State, error) {
	st, ok := b.Channel(ctx)
	if !ok {
		return channel.State{}, errors.New("quotation: no channel with this server")
	}
	return b.closeChannel(ctx, st)
}

// closeChannel closes channel st and has its refund paid; the buyer then
// has no channel.
func (b *Buyer) closeChannel(ctx context.Context, st channel.State) (channel.State, error) {
	for try := 0; ; try++ {
		params, err := cep8.NewCloseParams(ctx, b.Pay.Channel.Wallet, st)
		if err != nil {
			return st, err
		}
		var res cep8.CloseResult
		err = b.rpc(ctx, cep8.MethodChannelClose, params, &res)
		if err == nil {
			p, err := channel.UnmarshalPayload(res.Channel)
			if err != nil {
				return st, fmt.Errorf("quotation: the server's close result: %w", err)
			}
			s, err := channel.StateOf(&p)
			if err != nil {
				return st, fmt.Errorf("quotation: the server's close result: %w", err)
			}
			s.Closed, s.Owed, s.Refund = true, uint64(res.Owed), channel.RefundPaid
			c := b.channel()
			c.mu.Lock()
			if c.client == nil || c.client.State().Channel == s.Channel {
				c.loaded, c.client = true, nil
				c.store.Put(ctx, buyerChannelSpace, []byte(b.URL), nil, time.Now())
			}
			if err := updateEndpoint(ctx, c.store, b.URL, func(rec *endpointRecord) { refunded(rec, s, time.Now()) }); err != nil {
				b.logger().Warn("could not record the refunded channel", "channel", s.Channel, "err", err)
			}
			c.mu.Unlock()
			return s, nil
		}
		// The server's state differs from the buyer's (a call it never
		// heard of, or one the buyer never heard back from): invoice what
		// it says is owed, once.
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || try > 0 {
			return st, err
		}
		p, perr := channel.UnmarshalPayload(werr.Data)
		if perr != nil {
			return st, err
		}
		s, perr := channel.StateOf(&p)
		if perr != nil || s.Channel != st.Channel {
			return st, err
		}
		st = s
	}
}

// report tells Pay.Report, if any.
func (b *Buyer) report(r contextvm.PaymentReport) {
	if b.Pay != nil && b.Pay.Report != nil {
		b.Pay.Report(r)
	}
}
