package quotation

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Prepaid payment channels over HTTP (docs/protocol-compatibility.md,
// "Prepaid payment channels", "Over HTTP"): a deposit is quoted, paid and
// confirmed like a call's price, and confirming it opens the channel (or
// tops it up); a priced tools/call then carries a signed receipt in
// channel.Header instead of a quotation id; cep8.MethodChannelClose closes
// the channel and refunds the rest, as over ContextVM.

// maxDeposit bounds a deposit a client may ask for: 0.1 BTC, as over
// ContextVM.
const maxDeposit = 10_000_000_000

// Deposit is what a channel's quotation funds: a new channel (TopUp empty)
// or a top-up of channel TopUp, for the key that asked (Client, its
// public key bytes; Fragment, its DID URL fragment), which the channel's
// receipts must be signed with.
type Deposit struct {
	AmountMsat uint64 `json:"amount_msat"`
	TopUp      string `json:"topup,omitempty"`
	Client     []byte `json:"client"`
	Fragment   string `json:"fragment"`
}

// depositParams are nip10/quote's params asking for a deposit:
// {"channel": {"deposit": "<msat>", "id": "0x…" (a top-up)}}.
type depositParams struct {
	Channel *struct {
		Deposit channel.Amount `json:"deposit"`
		ID      string         `json:"id,omitempty"`
	} `json:"channel"`
}

// QuoteDeposit issues the payment request of deposit dep, for caller: a
// quotation that pays for no call, and whose confirmation funds the
// channel. Only a Lightning invoice funds a channel: its payment hash is
// part of the channel's id.
func (d *Desk) QuoteDeposit(ctx context.Context, caller string, dep Deposit) (Quote, error) {
	if caller == "" {
		return Quote{}, ErrAnonymous
	}
	if dep.AmountMsat == 0 || dep.AmountMsat%1000 != 0 || dep.AmountMsat > maxDeposit {
		return Quote{}, fmt.Errorf("%w: a deposit of %d msat: it must be whole sats, at most %d msat", ErrInvalidInput, dep.AmountMsat, uint64(maxDeposit))
	}
	id := rand.Text()
	what := "channel deposit"
	if dep.TopUp != "" {
		what = "channel top-up"
	}
	sats := int64(dep.AmountMsat / 1000)
	charge := payments.Charge{Amount: sats, Unit: contextvm.DefaultPriceUnit, Description: what, RequestID: id, Client: chargeClient(caller)}
	pr, err := d.opts.Processor.Require(ctx, charge)
	if err != nil {
		return Quote{}, fmt.Errorf("quotation: payment request: %w", err)
	}
	if pr.PMI != payments.PMILightningBolt11 {
		return Quote{}, fmt.Errorf("%w: channels are funded by Lightning invoices, this server is paid with %s", ErrInvalidInput, pr.PMI)
	}
	rec := record{Caller: caller, Price: Price{Amount: sats, Unit: contextvm.DefaultPriceUnit}, Payment: pr,
		Expires: d.opts.Now().Add(d.opts.TTL), ChargeID: id, Deposit: &dep}
	if err := d.put(ctx, id, rec); err != nil {
		return Quote{}, err
	}
	return Quote{ID: id, Price: rec.Price, Instructions: Instructions{PMI: pr.PMI, PayReq: pr.PayReq}, ExpiresAt: rec.Expires.Unix()}, nil
}

// callerKey is the key the request was signed with, if any.
func (h HTTP) callerKey(ctx context.Context) (didauth.Key, bool) {
	if h.CallerKey == nil {
		return didauth.Key{}, false
	}
	return h.CallerKey(ctx)
}

// quoteDeposit answers nip10/quote for a deposit.
func (h HTTP) quoteDeposit(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request, p depositParams) {
	ctx := r.Context()
	k, ok := h.callerKey(ctx)
	if !ok {
		answer(w, req.ID, nil, ErrAnonymous)
		return
	}
	dep := Deposit{AmountMsat: uint64(p.Channel.Deposit), TopUp: p.Channel.ID, Client: k.Public.Bytes, Fragment: channel.Fragment(k.ID)}
	if dep.TopUp != "" {
		// Refused now rather than once paid: a top-up of a channel that
		// is not this key's, or is closed, would be money stuck.
		id, err := channel.ParseID(dep.TopUp)
		if err != nil {
			answer(w, req.ID, nil, fmt.Errorf("%w: %w", ErrInvalidInput, err))
			return
		}
		st, err := h.Channels.Get(ctx, dep.Client, id)
		if err == nil && st.Closed {
			err = channel.Refuse(channel.CodeClosed, &st, "channel %s is closed; open another", id)
		}
		if err != nil {
			h.channelError(w, req.ID, err)
			return
		}
	}
	q, err := h.Desk.QuoteDeposit(ctx, h.caller(ctx), dep)
	answer(w, req.ID, q, err)
}

// confirmResult is nip10/confirm's result; Channel is the answer payload
// of the channel a deposit opened or topped up.
type confirmResult struct {
	Status  string          `json:"status"`
	Channel json.RawMessage `json:"channel,omitempty"`
}

// confirm answers nip10/confirm: a paid deposit opens or tops up its
// channel. Confirming again funds nothing twice (channel.Books' Open and
// TopUp apply a payment once) and answers the channel's state: a client
// whose confirmation was lost asks again.
func (h HTTP) confirm(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request, id, proof string) {
	ctx := r.Context()
	rec, err := h.Desk.confirm(ctx, h.caller(ctx), id, proof)
	if err != nil || rec.Deposit == nil {
		answer(w, req.ID, confirmResult{Status: "confirmed"}, err)
		return
	}
	if h.Channels == nil {
		answer(w, req.ID, nil, errors.New("quotation: this server no longer offers channels; the deposit is paid and stays owed"))
		return
	}
	st, err := h.fund(ctx, rec)
	if err != nil {
		h.channelError(w, req.ID, err)
		return
	}
	pl := st.Answer(0)
	b, _ := channel.MarshalPayload(&pl)
	answer(w, req.ID, confirmResult{Status: "confirmed", Channel: b}, nil)
}

// fund opens or tops up the channel the paid deposit rec funds.
func (h HTTP) fund(ctx context.Context, rec record) (channel.State, error) {
	inv, err := bolt11.Decode(rec.Payment.PayReq)
	if err != nil {
		return channel.State{}, fmt.Errorf("quotation: the deposit's invoice: %w", err)
	}
	dep := rec.Deposit
	f := channel.Funding{PaymentHash: inv.Hash, AmountMsat: dep.AmountMsat, Client: dep.Client, Fragment: dep.Fragment}
	if dep.TopUp == "" {
		return h.Channels.Open(ctx, f)
	}
	id, err := channel.ParseID(dep.TopUp)
	if err != nil {
		return channel.State{}, err
	}
	return h.Channels.TopUp(ctx, id, f)
}

// channelError answers a JSON-RPC request (a quotation method, the close)
// whose channel was refused: cep8.CodeChannelRefused with the error
// payload as data, as over ContextVM.
func (h HTTP) channelError(w http.ResponseWriter, id jsonrpc.ID, err error) {
	var refused *channel.Error
	if !errors.As(err, &refused) {
		h.Desk.opts.Logger.Error("channel books failed", "err", err)
		answer(w, id, nil, err)
		return
	}
	p := refused.Payload()
	data, _ := channel.MarshalPayload(&p)
	writeResponse(w, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: cep8.CodeChannelRefused, Message: refused.Error(), Data: data}})
}

// byReceipt serves a priced tools/call that carries channel.Header: the
// receipt, signed by the key the request was signed with, is checked
// against the books and recorded, and the call runs with the channel's
// state in the answer's header. A refused receipt is answered with its
// code's HTTP status, the error payload as header and body; nothing runs.
func (h HTTP) byReceipt(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request, cap payments.Cap, next http.Handler) {
	ctx := r.Context()
	p, err := channel.DecodeHeader(r.Header.Get(channel.Header))
	switch {
	case err != nil:
		writeRefusal(w, "", channel.Refuse(channel.CodeMalformed, nil, "%v", err), 0)
		return
	case p.SignedSubRAV == nil || p.ClientTxRef == "":
		writeRefusal(w, p.ClientTxRef, channel.Refuse(channel.CodeMalformed, nil, "a request's %s carries clientTxRef and signedSubRav", channel.Header), 0)
		return
	case cap.Unit != contextvm.DefaultPriceUnit:
		writeRefusal(w, p.ClientTxRef, channel.Refuse(channel.CodeMalformed, nil, "channels pay prices in sats, this one is in %s", cap.Unit), 0)
		return
	}
	k, ok := h.callerKey(ctx)
	if !ok {
		writeRefusal(w, p.ClientTxRef, channel.Refuse(channel.CodeAuthMissing, nil, "a channel is its signing key's: sign the request (Authorization: DIDAuthV1)"), 0)
		return
	}
	client, rav := k.Public.Bytes, &p.SignedSubRAV.SubRAV
	q, err := payments.Resolve(ctx, h.Desk.opts.Pricer, payments.PriceRequest{Cap: cap, Method: "tools/call", Params: req.Params, Client: h.caller(ctx), RequestID: p.ClientTxRef})
	if err != nil {
		answer(w, req.ID, nil, err)
		return
	}
	if q.Waive {
		// Not debited; the state tells the client that its receipt is
		// still to be spent.
		if st, err := h.Channels.Get(ctx, client, rav.ChannelID); err == nil {
			setAnswer(w, p.ClientTxRef, st, 0)
		}
		next.ServeHTTP(w, r)
		return
	}
	price := uint64(q.Amount) * 1000
	var refusal *channel.Error
	switch {
	case p.SignedSubRAV.Verify(k.Public) != nil:
		refusal = channel.Refuse(channel.CodeInvalidSignature, nil, "the receipt is not signed by %s", k.ID)
	case p.MaxAmount > 0 && price > uint64(p.MaxAmount):
		refusal = channel.Refuse(channel.CodeMaxAmountExceeded, nil, "the call costs %d msat, the request allows %d", price, p.MaxAmount)
	}
	if refusal != nil {
		if st, err := h.Channels.Get(ctx, client, rav.ChannelID); err == nil {
			refusal.State = &st
		}
		writeRefusal(w, p.ClientTxRef, refusal, price)
		return
	}
	st, err := h.Channels.Accept(ctx, client, rav, price, p.ClientTxRef)
	if err != nil {
		if !errors.As(err, &refusal) {
			h.Desk.opts.Logger.Error("channel books failed", "caller", h.caller(ctx), "err", err)
			writeRefusal(w, p.ClientTxRef, nil, price)
			return
		}
		h.Desk.opts.Logger.Info("channel receipt refused", "caller", h.caller(ctx), "code", refusal.Code)
		writeRefusal(w, p.ClientTxRef, refusal, price)
		return
	}
	setAnswer(w, p.ClientTxRef, st, price)
	sw := &statusWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r)
	if sw.status >= 300 {
		// Refused by MCP's transport before it ran (see Release): the
		// receipt stays accepted, and the client resends with the next.
		h.Desk.opts.Logger.Warn("a call paid by receipt was refused before MCP; its price stays debited",
			"caller", h.caller(ctx), "status", sw.status, "channel", rav.ChannelID, "nonce", rav.Nonce)
	}
}

// setAnswer puts NIP-4's answer payload in the answer's header: the
// channel's state after this call, its cost.
func setAnswer(w http.ResponseWriter, ref string, st channel.State, price uint64) {
	p := st.Answer(price)
	p.ClientTxRef = ref
	if v, err := channel.EncodeHeader(&p); err == nil {
		w.Header().Set(channel.Header, v)
	}
}

// writeRefusal answers a refused receipt: its code's HTTP status, the
// error payload (with the call's price as cost) as header and body. A nil
// refusal is the books' own failure: 500, nothing charged.
func writeRefusal(w http.ResponseWriter, ref string, refusal *channel.Error, price uint64) {
	status := http.StatusInternalServerError
	p := channel.Payload{Version: channel.Version, Error: &channel.PayloadError{Code: "INTERNAL_ERROR",
		Message: "the server could not check the receipt; nothing was charged; retry later"}}
	if refusal != nil {
		status, p = refusal.Code.HTTPStatus(), refusal.Payload()
	}
	p.ClientTxRef, p.Cost = ref, channel.Amount(price)
	body, err := channel.MarshalPayload(&p)
	if err != nil {
		body = []byte(`{"version":1}`)
	}
	if v, err := channel.EncodeHeader(&p); err == nil {
		w.Header().Set(channel.Header, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// refundTimeout bounds the payment of a refund through the server's wallet.
const refundTimeout = time.Minute

// closeChannel answers cep8.MethodChannelClose: the caller's channel
// closes and what it owes is paid to the caller's invoice, once
// (channel.Books.Refund).
func (h HTTP) closeChannel(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) {
	ctx := r.Context()
	k, ok := h.callerKey(ctx)
	if !ok {
		answer(w, req.ID, nil, ErrAnonymous)
		return
	}
	var p cep8.CloseParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		answer(w, req.ID, nil, fmt.Errorf("%w: want {channel, invoice}", ErrInvalidInput))
		return
	}
	id, err := channel.ParseID(p.Channel)
	if err != nil {
		answer(w, req.ID, nil, fmt.Errorf("%w: %w", ErrInvalidInput, err))
		return
	}
	rctx, cancel := context.WithTimeout(ctx, refundTimeout)
	st, err := h.Channels.Refund(rctx, k.Public.Bytes, id, p.Invoice)
	cancel()
	var refused *channel.Error
	switch {
	case errors.As(err, &refused):
		h.channelError(w, req.ID, err)
		return
	case errors.Is(err, channel.ErrRefundBusy):
		writeResponse(w, &jsonrpc.Response{ID: req.ID, Error: contextvm.BusyError(err.Error(), time.Second)})
		return
	case err != nil:
		// An invoice for another amount, expired, or a refund not paid
		// yet: the state says what is owed, to invoice again.
		h.Desk.opts.Logger.Info("channel refund not paid", "caller", h.caller(ctx), "channel", id, "err", err)
		pl := st.Answer(0)
		data, _ := channel.MarshalPayload(&pl)
		writeResponse(w, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data}})
		return
	}
	pl := st.Answer(0)
	state, _ := channel.MarshalPayload(&pl)
	answer(w, req.ID, cep8.CloseResult{Channel: state, Owed: channel.Amount(st.Owed), Refund: st.Refund.String()}, nil)
}
