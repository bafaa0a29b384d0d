package cep8

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ChannelOptions make a Payer pay over prepaid payment channels
// (PayOptions.Channel) the servers that offer them (channel.PMI among
// their pmi tags): the first priced call to such a server opens a channel
// with Deposit, paid by invoice like any price, and later calls carry a
// receipt instead (no invoice, no wallet). Servers that do not offer
// channels are paid by invoice, as without these options.
type ChannelOptions struct {
	// DepositSats is the deposit of each channel opened. It counts against
	// the budget's daily limits when paid; each call's price is still
	// bounded by the budget's PerCall.
	DepositSats int64
	// Wallet makes the invoice a channel's refund is paid to
	// (Payer.CloseChannel): the client's own wallet.
	Wallet payments.Wallet
	// Store keeps each server's channel, the server's last word on it,
	// across restarts; nil keeps them in memory.
	Store durable.Store
}

// channelSpace is the Payer's durable space: a server's channel (NIP-4's
// answer payload of its state), by the server's hex key.
const channelSpace = "cep8.channels"

// channelKeep is how long a channel's state is kept after its last use.
const channelKeep = 400 * 24 * time.Hour

// fundWait is how long a funding request (channel_open, channel_topup)
// holds back another for the same server: it is paid meanwhile, and the
// calls made meanwhile pay invoices.
const fundWait = 10 * time.Minute

// channels is a Payer's side of its channels, one per server.
type channels struct {
	opts  ChannelOptions
	store durable.Store

	mu      sync.Mutex
	clients map[nostr.PubKey]*channel.Client // loaded from store
	costs   map[string]uint64                // msat, by server and capability: the last cost the server named
	funding map[nostr.PubKey]fundingCall     // a funding request in flight, by server
}

// fundingCall is a request that carries a channel_open or channel_topup tag.
type fundingCall struct {
	req *jsonrpc.Request
	at  time.Time
}

func newChannels(o *ChannelOptions) *channels {
	if o == nil || o.DepositSats <= 0 {
		return nil
	}
	st := o.Store
	if st == nil {
		st = durable.NewMemory(durable.Options{})
	}
	return &channels{opts: *o, store: st, clients: map[nostr.PubKey]*channel.Client{},
		costs: map[string]uint64{}, funding: map[nostr.PubKey]fundingCall{}}
}

// client returns the channel with server, nil if there is none; ch.mu held.
func (ch *channels) clientLocked(ctx context.Context, server nostr.PubKey) *channel.Client {
	if c, ok := ch.clients[server]; ok {
		return c
	}
	raw, ok, err := ch.store.Get(ctx, channelSpace, server[:])
	if err != nil || !ok {
		return nil
	}
	p, err := channel.UnmarshalPayload(raw)
	if err != nil {
		return nil
	}
	s, err := channel.StateOf(&p)
	if err != nil {
		return nil
	}
	c := channel.NewClient(s)
	ch.clients[server] = c
	return c
}

// tags are the channel tags of call: a receipt for its price, or a
// request to open (or top up) the channel it will be the first receipt of.
// A call above the budget's PerCall carries none: it is declined. A call
// of unknown price (a free tool, or a priced one whose price the client
// has not seen yet) carries a receipt of nothing more that the client does
// not count as spent: a server ignores it on a free call, and refuses it
// on a priced one, naming the cost, and the call is sent again with its
// receipt. Counted, it would put the client's next receipt one ahead of
// the server's books after every free call (a refusal and a resend on each
// paid call that follows one).
func (ch *channels) tags(call *contextvm.PaidCall, budget *payments.Budget) nostr.Tags {
	capability, ok := contextvm.PricedCapability(call.Request())
	if !ok || budget == nil || !slices.Contains(call.ServerPMIs(), channel.PMI) {
		return nil
	}
	server := call.Server()
	ctx := context.Background()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	price, known := ch.costs[server.Hex()+" "+capability]
	if !known {
		if p, ok := call.Price(); ok {
			if lo, hi, err := p.Range(); err == nil && lo == hi && (p.Unit == "" || p.Unit == contextvm.DefaultPriceUnit) {
				price, known = uint64(lo)*1000, true
			}
		}
	}
	if known && price > uint64(max(budget.PerCall, 0))*1000 {
		return nil
	}
	deposit := strconv.FormatInt(ch.opts.DepositSats*1000, 10)
	c := ch.clientLocked(ctx, server)
	var tag nostr.Tag
	if c != nil {
		var r channel.SubRAV
		var err error
		if known {
			r, err = c.Pay(price)
		} else {
			st := c.State()
			r, err = st.Next(0)
		}
		switch {
		case err == nil:
			tag, _ = channel.Tag(r)
		case errors.Is(err, channel.ErrInsufficientFunds):
			tag = nostr.Tag{TagChannelTopUp, c.State().Channel.String(), deposit}
		}
	}
	if tag == nil || tag[0] != channel.TagName {
		if tag == nil {
			tag = nostr.Tag{TagChannelOpen, deposit}
		}
		if f, ok := ch.funding[server]; ok && time.Since(f.at) < fundWait {
			return nil // one funding at a time: this call pays by invoice
		}
		ch.funding[server] = fundingCall{req: call.Request(), at: time.Now()}
	}
	return nostr.Tags{tag}
}

// funds reports whether call asked to fund a channel with server.
func (ch *channels) funds(call *contextvm.PaidCall) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	f, ok := ch.funding[call.Server()]
	return ok && f.req == call.Request()
}

// unfund forgets call's funding request, which was not paid: the next
// call may ask again.
func (ch *channels) unfund(call *contextvm.PaidCall) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if f, ok := ch.funding[call.Server()]; ok && f.req == call.Request() {
		delete(ch.funding, call.Server())
	}
}

// answered reads what the server says of its channel in resp, the answer
// to call: the state in a result's _meta, or in a CodeChannelRefused
// error's data. It reports whether call should be sent again (a refused
// receipt, once, now that the state is the server's).
func (ch *channels) answered(call *contextvm.PaidCall, resp *jsonrpc.Response) (resend bool) {
	server := call.Server()
	ch.unfund(call)
	var raw json.RawMessage
	refused := false
	if resp.Error == nil {
		if !bytes.Contains(resp.Result, []byte(`"`+MetaChannel+`"`)) {
			return false // most answers: no need to read them
		}
		var res struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(resp.Result, &res) != nil || res.Meta[MetaChannel] == nil {
			return false
		}
		raw = res.Meta[MetaChannel]
	} else {
		var werr *jsonrpc.Error
		if !errors.As(resp.Error, &werr) || werr.Code != CodeChannelRefused {
			return false
		}
		raw, refused = werr.Data, true
	}
	p, err := channel.UnmarshalPayload(raw)
	if err != nil {
		call.Logger().Warn("the server's channel state cannot be read", "err", err)
		return false
	}
	capability, _ := contextvm.PricedCapability(call.Request())
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if p.Cost > 0 && capability != "" {
		ch.costs[server.Hex()+" "+capability] = uint64(p.Cost)
	}
	if p.Error != nil && (p.Error.Code == channel.CodeNotFound || p.Error.Code == channel.CodeClosed) {
		// Gone, or closed by the server: the next call opens another.
		if p.SubRAV != nil && uint64(p.Deposit) > p.SubRAV.AccumulatedAmount {
			call.Logger().Warn("the server closed a channel with money left in it; it stays owed to this client (cvm/channel_close with an invoice)",
				"channel", p.SubRAV.ChannelID, "owed_msat", uint64(p.Deposit)-p.SubRAV.AccumulatedAmount)
		}
		delete(ch.clients, server)
		ch.store.Put(context.Background(), channelSpace, server[:], nil, time.Now())
		return refused && call.Resent() == 0
	}
	s, err := channel.StateOf(&p)
	if err != nil {
		call.Logger().Warn("the server's channel state cannot be read", "err", err)
		return false
	}
	ch.keepLocked(server, s)
	return refused && call.Resent() == 0
}

// keepLocked takes s, the server's state of its channel, as the client's,
// and stores it; ch.mu held.
func (ch *channels) keepLocked(server nostr.PubKey, s channel.State) {
	c := ch.clients[server]
	if c == nil || c.State().Channel != s.Channel {
		c = channel.NewClient(s)
		ch.clients[server] = c
	} else if c.Resync(s) != nil {
		return
	}
	p := s.Answer(0)
	if b, err := channel.MarshalPayload(&p); err == nil {
		ch.store.Put(context.Background(), channelSpace, server[:], b, time.Now().Add(channelKeep))
	}
}

// Channel returns the state of the channel with server as this client
// knows it (the server's last word, and the receipts sent since); false
// if there is none.
func (p *Payer) Channel(ctx context.Context, server nostr.PubKey) (channel.State, bool) {
	if p.ch == nil {
		return channel.State{}, false
	}
	p.ch.mu.Lock()
	defer p.ch.mu.Unlock()
	c := p.ch.clientLocked(ctx, server)
	if c == nil {
		return channel.State{}, false
	}
	return c.State(), true
}

// CloseChannel closes the channel with the server of opts and has the
// server pay back what it did not spend, to an invoice made by
// ChannelOptions.Wallet: it sends cvm/channel_close on a connection of its
// own (stateless, opts otherwise as given). It returns the closed
// channel's state, with what was refunded (Owed). A refund interrupted
// (a crash, a timeout) is completed by closing again: the server pays the
// invoice it recorded, once.
func (p *Payer) CloseChannel(ctx context.Context, opts contextvm.ClientOptions) (channel.State, error) {
	if p.ch == nil {
		return channel.State{}, errors.New("cep8: this payer has no ChannelOptions")
	}
	server, err := nostr.PubKeyFromHex(opts.Server)
	if err != nil {
		return channel.State{}, fmt.Errorf("cep8: server key: %w", err)
	}
	st, ok := p.Channel(ctx, server)
	if !ok {
		return channel.State{}, errors.New("cep8: no channel with this server")
	}
	opts.Stateless, opts.Payer = true, nil
	t, err := contextvm.NewClientTransport(opts)
	if err != nil {
		return channel.State{}, err
	}
	conn, err := t.Connect(ctx)
	if err != nil {
		return channel.State{}, err
	}
	defer conn.Close()
	for try := 0; ; try++ {
		params, err := NewCloseParams(ctx, p.ch.opts.Wallet, st)
		if err != nil {
			return st, err
		}
		resp, err := closeCall(ctx, conn, params)
		if err != nil {
			return st, err
		}
		if resp.Error == nil {
			var res CloseResult
			if err := json.Unmarshal(resp.Result, &res); err != nil {
				return st, fmt.Errorf("cep8: the server's close result: %w", err)
			}
			pl, err := channel.UnmarshalPayload(res.Channel)
			if err == nil {
				var s channel.State
				if s, err = channel.StateOf(&pl); err == nil {
					st, st.Closed, st.Owed = s, true, uint64(res.Owed)
					st.Refund = channel.RefundPaid
				}
			}
			p.ch.mu.Lock()
			delete(p.ch.clients, server)
			p.ch.store.Put(ctx, channelSpace, server[:], nil, time.Now())
			p.ch.mu.Unlock()
			return st, err
		}
		// The server's state differs from the client's (a call it never
		// heard of, or one this client never heard back from): invoice
		// what it says is owed, once.
		var werr *jsonrpc.Error
		if !errors.As(resp.Error, &werr) || try > 0 {
			return st, resp.Error
		}
		pl, perr := channel.UnmarshalPayload(werr.Data)
		if perr != nil {
			return st, resp.Error
		}
		s, perr := channel.StateOf(&pl)
		if perr != nil || s.Channel != st.Channel {
			return st, resp.Error
		}
		st = s
	}
}

// NewCloseParams are the params that close channel st: its id, and an
// invoice made by w for what the channel owes (none when nothing is).
func NewCloseParams(ctx context.Context, w payments.Wallet, st channel.State) (CloseParams, error) {
	params := CloseParams{Channel: st.Channel.String()}
	owed := st.Deposit - min(st.Accumulated, st.Deposit)
	if owed == 0 {
		return params, nil
	}
	if w == nil {
		return params, errors.New("cep8: a wallet is needed to invoice the refund (ChannelOptions.Wallet)")
	}
	inv, err := w.MakeInvoice(ctx, int64(owed), "cvm channel refund", 10*time.Minute)
	if err != nil {
		return params, fmt.Errorf("cep8: invoice the refund of %d msat: %w", owed, err)
	}
	params.Invoice = inv.Bolt11
	return params, nil
}

// closeCall sends params as cvm/channel_close on conn and reads its answer.
func closeCall(ctx context.Context, conn interface {
	Write(context.Context, jsonrpc.Message) error
	Read(context.Context) (jsonrpc.Message, error)
}, params CloseParams) (*jsonrpc.Response, error) {
	raw, _ := json.Marshal(params)
	id, _ := jsonrpc.MakeID("close")
	if err := conn.Write(ctx, &jsonrpc.Request{ID: id, Method: MethodChannelClose, Params: raw}); err != nil {
		return nil, err
	}
	for {
		m, err := conn.Read(ctx)
		if err != nil {
			return nil, err
		}
		if r, ok := m.(*jsonrpc.Response); ok && r.ID == id {
			return r, nil
		}
	}
}
