package cep8

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The wire of prepaid payment channels over ContextVM (docs/
// protocol-compatibility.md, "Prepaid payment channels"): a server that
// offers them lists channel.PMI among its pmi tags.
const (
	// TagChannelOpen on a priced request asks to open a channel with a
	// deposit (msat, whole sats): ["channel_open", "<deposit msat>"]. The
	// request is answered by the transparent flow for the deposit, and
	// once it is paid the channel opens and the request is its first
	// receipt.
	TagChannelOpen = "channel_open"
	// TagChannelTopUp on a priced request adds to a channel's deposit,
	// the same way: ["channel_topup", "<channel id>", "<amount msat>"].
	TagChannelTopUp = "channel_topup"
	// MethodChannelClose closes the client's channel and pays what it owes
	// back: params {"channel": "0x…", "invoice": "<BOLT11 of the owed
	// amount>"} (no invoice when nothing is owed); the result is
	// {"channel": <payload>, "owed_msat": "N", "refund": "paid"}.
	MethodChannelClose = "cvm/channel_close"
	// MetaChannel names the channel's state in the _meta of the result of
	// a call a channel paid for: NIP-4's answer payload {"version":1,
	// "subRav":{…},"cost":"<msat>","deposit":"<msat>"}.
	MetaChannel = "cvm/channel"
	// CodeChannelRefused answers a request whose channel receipt was
	// refused: the request did not run and nothing was debited; data is
	// NIP-4's error payload, the channel's state to make the next receipt
	// from ({"version":1,"subRav":{…},"cost":"<msat>","error":{"code",
	// "message"},"deposit":"<msat>"}).
	CodeChannelRefused = -32050
)

// funding is a payment that opens a channel (TopUp zero) or tops one up,
// asked for with a priced request that it pays for too.
type funding struct {
	Amount uint64     `json:"amount_msat"`
	Price  uint64     `json:"price_msat"`
	TopUp  channel.ID `json:"topup,omitzero"`
}

// channelMeta is the _meta of a payment_required that funds a channel:
// {"cvm/channel": {"deposit": "<msat>", "cost": "<msat>"}}, for the client
// to tell it from the price of the call (see Payer.Pay).
type channelMeta struct {
	Channel *channelFunding `json:"cvm/channel"`
}

type channelFunding struct {
	Deposit channel.Amount `json:"deposit"`
	Cost    channel.Amount `json:"cost"`
}

// maxDeposit bounds a deposit a client may ask for: 0.1 BTC.
const maxDeposit = 10_000_000_000

// byChannel serves a priced request that carries a channel tag, a
// channel_open or a channel_topup tag, and reports whether it did: it was
// charged (or refused) on the channel. charge is its price, in sats.
func (g *Gate) byChannel(ctx context.Context, call *contextvm.Call, charge payments.Charge) bool {
	tags := call.Event().Tags
	r, hasReceipt, err := channel.FromTags(tags)
	open, topUp := findTag(tags, TagChannelOpen), findTag(tags, TagChannelTopUp)
	if !hasReceipt && err == nil && open == nil && topUp == nil {
		return false
	}
	if err == nil && call.Batched() {
		err = errors.New("a channel tag pays for one call: not on a batch")
	}
	if err == nil && charge.Unit != contextvm.DefaultPriceUnit {
		err = fmt.Errorf("channels pay prices in sats, this one is in %s", charge.Unit)
	}
	if err == nil && (hasReceipt && (open != nil || topUp != nil) || open != nil && topUp != nil) {
		err = errors.New("a request carries one of channel, channel_open and channel_topup")
	}
	if err != nil {
		call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "channel: " + err.Error()})
		return true
	}
	price := uint64(charge.Amount) * 1000
	if hasReceipt {
		g.byReceipt(ctx, call, charge, &r, price)
		return true
	}
	f, err := parseFunding(open, topUp, price)
	if err != nil {
		call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "channel: " + err.Error()})
		return true
	}
	deposit := charge
	deposit.Amount = int64(f.Amount / 1000)
	deposit.Description = "channel deposit (" + charge.Description + ")"
	g.transparent(ctx, call, deposit, nil, &f)
	return true
}

// findTag is the first tag named name, nil if none.
func findTag(tags nostr.Tags, name string) nostr.Tag {
	for _, t := range tags {
		if len(t) > 0 && t[0] == name {
			return t
		}
	}
	return nil
}

// fundingMeta is the _meta of the payment request of f.
func fundingMeta(f funding) json.RawMessage {
	var m channelMeta
	m.Channel = &channelFunding{Deposit: channel.Amount(f.Amount), Cost: channel.Amount(f.Price)}
	b, _ := json.Marshal(m)
	return b
}

// parseFunding reads a channel_open or channel_topup tag.
func parseFunding(open, topUp []string, price uint64) (funding, error) {
	var f funding
	amount := ""
	switch {
	case len(open) == 2:
		amount = open[1]
	case len(topUp) == 3:
		id, err := channel.ParseID(topUp[1])
		if err != nil {
			return f, err
		}
		f.TopUp, amount = id, topUp[2]
	default:
		return f, fmt.Errorf("%q takes the amount in msat, %q the channel id and the amount", TagChannelOpen, TagChannelTopUp)
	}
	n, err := strconv.ParseUint(amount, 10, 64)
	switch {
	case err != nil:
		return f, fmt.Errorf("amount %.40q is not a whole number of msat", amount)
	case n%1000 != 0 || n == 0 || n > maxDeposit:
		return f, fmt.Errorf("a deposit of %d msat: it must be whole sats, at most %d msat", n, uint64(maxDeposit))
	case n < price:
		return f, fmt.Errorf("a deposit of %d msat does not cover this call's %d msat", n, price)
	}
	f.Amount, f.Price = n, price
	return f, nil
}

// byReceipt runs a request paid by receipt r, once the books accepted it:
// no invoice, no wallet. A refused receipt runs nothing.
func (g *Gate) byReceipt(ctx context.Context, call *contextvm.Call, charge payments.Charge, r *channel.SubRAV, price uint64) {
	// The charge is recorded first: a crash before the receipt is
	// accepted answers the replay CodePaidResultLost with nothing debited
	// (the client's next receipt resynchronises), never a debit without
	// a record that stops the call from running again.
	client, key := call.Client(), call.Key()
	g.paid(ctx, call, charge, channel.PMI)
	st, err := g.opts.Channels.Accept(ctx, client[:], r, price, key)
	if err != nil {
		g.forgetCharge(ctx, key)
		g.channelRefused(ctx, call, err, price)
		return
	}
	g.setState(call, st, price)
	call.Run()
}

// funded opens or tops up the channel that req, verified paid, funds, and
// debits the request's price as the channel's next receipt. It reports
// false when it answered the request instead (the deposit stays in the
// channel, to spend or be refunded).
func (g *Gate) funded(ctx context.Context, call *contextvm.Call, f funding, req payments.PaymentRequired) bool {
	inv, err := bolt11.Decode(req.PayReq)
	if err != nil {
		g.log.Error("a verified channel deposit has no readable invoice", "request", call.Key(), "err", err)
		call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "channel: the deposit's invoice cannot be read"})
		return false
	}
	client := call.Client()
	fund := channel.Funding{PaymentHash: inv.Hash, AmountMsat: f.Amount, Client: client[:], Fragment: channel.FragmentNostr}
	books := g.opts.Channels
	var st channel.State
	if f.TopUp == (channel.ID{}) {
		st, err = books.Open(ctx, fund)
	} else {
		st, err = books.TopUp(ctx, f.TopUp, fund)
	}
	// The server makes the call's receipt; a receipt of the client's that
	// raced it is taken first, and the next one made from the state after.
	if err == nil && st.Ref == call.Key() {
		// Debited already, before a restart: the request's replay.
		g.setState(call, st, f.Price)
		return true
	}
	for try := 0; err == nil && try < 3; try++ {
		var r channel.SubRAV
		if r, err = st.Next(f.Price); err != nil {
			break
		}
		if st, err = books.Accept(ctx, client[:], &r, f.Price, call.Key()); err == nil {
			g.setState(call, st, f.Price)
			return true
		}
		var refused *channel.Error
		if !errors.As(err, &refused) || refused.State == nil || !errors.Is(err, channel.ErrConflict) {
			break
		}
		st = *refused.State
	}
	g.log.Warn("a channel deposit was paid and the call not debited", "client", client.Hex(), "request", call.Key(), "err", err)
	g.channelRefused(ctx, call, err, f.Price)
	return false
}

// forgetCharge drops the charge recorded for the request under key, which
// was not charged after all.
func (g *Gate) forgetCharge(ctx context.Context, key string) {
	g.running.Delete(key)
	if err := g.state.Put(ctx, chargeSpace, []byte(key), nil, time.Now()); err != nil {
		g.log.Warn("could not forget a charge", "request", key, "err", err)
	}
}

// setState puts the channel's state after this call in its result's _meta.
func (g *Gate) setState(call *contextvm.Call, st channel.State, price uint64) {
	p := st.Answer(price)
	if b, err := channel.MarshalPayload(&p); err == nil {
		call.SetMeta(MetaChannel, b)
	}
}

// waived tells a client that sent a receipt for a call the server did not
// charge the channel's state, so that its next receipt is the right one.
func (g *Gate) waived(ctx context.Context, call *contextvm.Call) {
	r, ok, err := channel.FromTags(call.Event().Tags)
	if !ok || err != nil {
		return
	}
	client := call.Client()
	if st, err := g.opts.Channels.Get(ctx, client[:], r.ChannelID); err == nil {
		g.setState(call, st, 0)
	}
}

// channelRefused answers a request whose channel payment was refused:
// CodeChannelRefused with the channel's state, or, for a failure of the
// books, an internal error. Nothing ran.
func (g *Gate) channelRefused(ctx context.Context, call *contextvm.Call, err error, price uint64) {
	var refused *channel.Error
	if !errors.As(err, &refused) {
		g.log.Error("channel books failed", "client", call.Client().Hex(), "request", call.Key(), "err", err)
		call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "channel: the server could not check the receipt; nothing was charged; retry later"})
		return
	}
	p := refused.Payload()
	p.Cost = channel.Amount(price)
	data, _ := channel.MarshalPayload(&p)
	g.log.Info("channel receipt refused", "client", call.Client().Hex(), "request", call.Key(), "code", refused.Code)
	call.Answer(ctx, &jsonrpc.Error{Code: CodeChannelRefused, Message: refused.Error(), Data: data})
}

// CloseParams are the params of MethodChannelClose, over ContextVM and
// HTTP alike.
type CloseParams struct {
	Channel string `json:"channel"`
	Invoice string `json:"invoice,omitempty"`
}

// CloseResult is the result of MethodChannelClose, over ContextVM and
// HTTP alike.
type CloseResult struct {
	Channel  json.RawMessage `json:"channel"`
	Owed     channel.Amount  `json:"owed_msat"`
	Refund   string          `json:"refund"`
	Preimage string          `json:"preimage,omitempty"`
}

// refundTimeout bounds the payment of a refund through the server's wallet.
const refundTimeout = time.Minute

// closeChannel serves MethodChannelClose: the client's channel closes and
// what it owes is paid to the client's invoice, once (channel.Books.Refund).
func (g *Gate) closeChannel(call *contextvm.Call) {
	call.Go(func(ctx context.Context) {
		var p CloseParams
		if err := json.Unmarshal(call.Request().Params, &p); err != nil {
			call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "channel close: params: " + err.Error()})
			return
		}
		id, err := channel.ParseID(p.Channel)
		if err != nil {
			call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "channel close: " + err.Error()})
			return
		}
		client := call.Client()
		rctx, cancel := context.WithTimeout(ctx, refundTimeout)
		st, err := g.opts.Channels.Refund(rctx, client[:], id, p.Invoice)
		cancel()
		var refused *channel.Error
		switch {
		case errors.As(err, &refused):
			g.channelRefused(ctx, call, err, 0)
			return
		case errors.Is(err, channel.ErrRefundBusy):
			call.Answer(ctx, contextvm.BusyError(err.Error(), time.Second))
			return
		case err != nil:
			// A refused invoice (its amount, its expiry) or a refund not
			// paid yet: the state says what is owed, to invoice again.
			g.log.Info("channel refund not paid", "client", client.Hex(), "channel", id, "err", err)
			pl := st.Answer(0)
			data, _ := channel.MarshalPayload(&pl)
			call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data})
			return
		}
		pl := st.Answer(0)
		state, _ := channel.MarshalPayload(&pl)
		res, _ := json.Marshal(CloseResult{Channel: state, Owed: channel.Amount(st.Owed), Refund: st.Refund.String()})
		call.Reply(ctx, res)
	})
}
