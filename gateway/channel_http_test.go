package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prepaid payment channels over HTTP, end to end: a gateway serving only
// HTTP (ListenHTTP) with channel.Books, a priced tool (translate, 10
// sats), DIDAuthV1 required, a simulated Lightning network; clients are
// quotation.Buyers paying by channel through their Transport.

type channelBench struct {
	ep     *gateway.HTTPEndpoint
	up     *paidUpstream
	net    *lnsim.Network
	client *lnsim.Wallet
	server *lnsim.Wallet
	books  *channel.Books
	store  durable.Store
	key    nostr.SecretKey
	now    func() time.Time // the books' clock; nil: time.Now and the default idle TTL
	paid   atomic.Int64     // payments the client's wallet made
}

func newChannelBench(t *testing.T, channels bool) *channelBench {
	t.Helper()
	return newChannelBenchOn(t, channels, nil, durable.NewMemory(durable.Options{}))
}

// newChannelBenchAt is newChannelBench with now the books' clock, and
// with it an idle TTL of idleTTL.
func newChannelBenchAt(t *testing.T, channels bool, now func() time.Time) *channelBench {
	t.Helper()
	return newChannelBenchOn(t, channels, now, durable.NewMemory(durable.Options{}))
}

// newChannelBenchOn is newChannelBenchAt keeping its books, nonces and
// quotations in store.
func newChannelBenchOn(t *testing.T, channels bool, now func() time.Time, store durable.Store) *channelBench {
	t.Helper()
	n, sw, cw := lightningWallets(t)
	b := &channelBench{net: n, client: cw, server: sw, store: store, key: nostr.Generate(), now: now}
	stop := n.OnSettle(func(s lnsim.Settlement) {
		if s.Payer == "client" {
			b.paid.Add(1)
		}
	})
	t.Cleanup(stop)
	b.listen(t, channels)
	return b
}

// replica is another gateway of the replica group b serves in: its own
// gateway, upstream, endpoint and books, on store (the group's, through
// a connection of its own) with b's key and wallet.
func (b *channelBench) replica(t *testing.T, store durable.Store) *channelBench {
	t.Helper()
	r := &channelBench{net: b.net, client: b.client, server: b.server, store: store, key: b.key, now: b.now}
	r.listen(t, true)
	return r
}

// listen starts b's gateway and its HTTP endpoint, offering channels with
// books on b.store when channels is set.
func (b *channelBench) listen(t *testing.T, channels bool) {
	t.Helper()
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	b.up = &paidUpstream{}
	gw := startGateway(t, ctx, gateway.Options{Upstream: gateway.InProcess(b.up.server()), NoNostr: true})
	opts := gateway.HTTPEndpointOptions{Addr: "127.0.0.1:0", Key: b.key, Store: b.store, RequireAuth: true,
		Processor: lightning.NewProcessor(b.server, lightning.ProcessorOptions{PollMin: time.Millisecond}),
		Prices:    []contextvm.Price{price(t, "tool:translate=10")}}
	if channels {
		pk := b.key.Public()
		var ttl time.Duration // the default
		if b.now != nil {
			ttl = idleTTL
		}
		books, err := channel.New(channel.Options{Store: b.store, ServerKey: pk[:], Refunder: channel.WalletRefunder{Wallet: b.server}, Now: b.now, IdleTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		b.books, opts.Channels = books, books
	}
	ep, err := gw.ListenHTTP(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Shutdown(context.Background()) })
	b.ep = ep
}

// buyer pays by channel, with a deposit of depositSats, each call capped
// at 10 sats; store keeps its channel (nil: memory).
func (b *channelBench) buyer(signer did.Signer, depositSats int64, store durable.Store) *quotation.Buyer {
	return &quotation.Buyer{URL: b.ep.URL, Client: signing(signer), Signer: signer, Pay: &cep8.PayOptions{
		Budget:   &payments.Budget{Unit: "sats", PerCall: 10},
		Handlers: []payments.Handler{lightning.NewHandler(b.client)},
		Channel:  &cep8.ChannelOptions{DepositSats: depositSats, Wallet: b.client, Store: store},
	}}
}

// connect opens an MCP session that sends through buyer's Transport.
func (b *channelBench) connect(t *testing.T, buyer *quotation.Buyer) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	hc := &http.Client{Transport: buyer.Transport(buyer.Client.Transport)}
	cs, err := newClient(nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.ep.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (b *channelBench) balance(t *testing.T, wallet string) int64 {
	t.Helper()
	v, err := b.net.Balance(wallet)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChannelHTTP_FiveCallsOneDepositCloseRefundsTheRest: five priced
// calls move the client's wallet once (the deposit), and closing the
// channel refunds all but their prices, with an Ed25519 and a secp256k1
// DID key.
func TestChannelHTTP_FiveCallsOneDepositCloseRefundsTheRest(t *testing.T) {
	for _, kt := range []did.KeyType{did.Ed25519, did.Secp256k1} {
		t.Run(string(kt), func(t *testing.T) {
			b := newChannelBench(t, true)
			signer, err := did.GenerateKey(kt)
			if err != nil {
				t.Fatal(err)
			}
			buyer := b.buyer(signer, 100, nil)
			cs := b.connect(t, buyer)
			before := b.balance(t, "client")
			for i := range 5 {
				if got := call(t, cs, "translate", map[string]any{"text": "hi"}); got != "fr:hi" {
					t.Fatalf("call %d: %q", i, got)
				}
			}
			if n := b.up.calls.Load(); n != 5 {
				t.Fatalf("translate ran %d times, want 5", n)
			}
			if n := b.paid.Load(); n != 1 {
				t.Fatalf("the client's wallet paid %d times, want once (the deposit)", n)
			}
			if got := b.balance(t, "client"); got != before-100_000 {
				t.Fatalf("client balance %d, want %d (the deposit paid)", got, before-100_000)
			}
			ctx := t.Context()
			if total, _, err := buyer.Pay.Budget.Spent(ctx, b.ep.URL); err != nil || total != 100 {
				t.Fatalf("the budget counts %d sats spent today (%v), want the deposit, 100", total, err)
			}
			st, ok := buyer.Channel(ctx)
			if !ok || st.Nonce != 5 || st.Accumulated != 50_000 || st.Deposit != 100_000 || st.Fragment != channel.Fragment(signer.KeyID()) {
				t.Fatalf("the buyer's channel: %+v, %v", st, ok)
			}
			server, err := b.books.Get(ctx, signer.PublicKey().Bytes, st.Channel)
			if err != nil || server.Nonce != 5 || server.Accumulated != 50_000 {
				t.Fatalf("the server's channel: %+v, %v", server, err)
			}
			closed, err := buyer.CloseChannel(ctx)
			if err != nil || closed.Owed != 50_000 || !closed.Closed {
				t.Fatalf("close: %+v, %v", closed, err)
			}
			if got := b.balance(t, "client"); got != before-50_000 {
				t.Fatalf("client balance after the refund %d, want %d", got, before-50_000)
			}
			if got := b.balance(t, "server"); got != 50_000 {
				t.Fatalf("server balance %d, want the five prices, 50000", got)
			}
			if _, ok := buyer.Channel(ctx); ok {
				t.Fatal("the buyer keeps a closed channel")
			}
			// Closing again refunds nothing twice.
			if _, err := b.books.Refund(ctx, signer.PublicKey().Bytes, st.Channel, ""); err != nil {
				t.Fatal(err)
			}
			if got := b.balance(t, "client"); got != before-50_000 {
				t.Fatalf("client balance after a second close %d, want %d", got, before-50_000)
			}
		})
	}
}

// rawChannel is a hand-made MCP session over HTTP that sends receipts it
// makes itself, signed as signer.
type rawChannel struct {
	t      *testing.T
	url    string
	hc     *http.Client
	signer did.Signer
	sid    string
}

func newRawChannel(t *testing.T, url string, signer did.Signer) *rawChannel {
	t.Helper()
	r := &rawChannel{t: t, url: url, hc: signing(signer), signer: signer}
	resp, _ := r.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "")
	r.sid = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || r.sid == "" {
		t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	return r
}

func (r *rawChannel) post(body, header string) (*http.Response, []byte) {
	r.t.Helper()
	req, _ := http.NewRequest("POST", r.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.sid != "" {
		req.Header.Set("Mcp-Session-Id", r.sid)
	}
	if header != "" {
		req.Header.Set(channel.Header, header)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, raw
}

// header is the request header carrying rav signed by the raw client.
func (r *rawChannel) header(rav channel.SubRAV, ref string) string {
	r.t.Helper()
	signed, err := channel.Sign(context.Background(), r.signer, rav)
	if err != nil {
		r.t.Fatal(err)
	}
	h, err := channel.EncodeHeader(&channel.Payload{Version: 1, ClientTxRef: ref, SignedSubRAV: &signed})
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

const translateCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"translate","arguments":{"text":"x"}}}`

// openOne opens a channel of depositSats for signer through a buyer and
// makes one call on it: the channel's state is nonce 1, 10000 msat.
func (b *channelBench) openOne(t *testing.T, signer did.Signer, depositSats int64) channel.State {
	t.Helper()
	buyer := b.buyer(signer, depositSats, nil)
	call(t, b.connect(t, buyer), "translate", map[string]any{"text": "first"})
	st, ok := buyer.Channel(t.Context())
	if !ok || st.Nonce != 1 || st.Accumulated != 10_000 {
		t.Fatalf("after one call: %+v, %v", st, ok)
	}
	return st
}

// TestChannelHTTP_RefusedReceiptsRunNothing: a tampered signature, a
// wrong channel, a wrong nonce, a receipt over the deposit, a receipt
// accepted already, a header that does not decode: each refused with its
// code's HTTP status, the error payload as header and as JSON body, the
// channel's state where it has one; the tool never runs, nothing is
// debited.
func TestChannelHTTP_RefusedReceiptsRunNothing(t *testing.T) {
	b := newChannelBench(t, true)
	signer := newSigner(t)
	st := b.openOne(t, signer, 15) // 15 sats: one more call would exceed it
	raw := newRawChannel(t, b.ep.URL, signer)
	next := st.Receipt()
	next.Nonce, next.AccumulatedAmount = 2, 20_000 // the right receipt, over the deposit

	tampered := func() string {
		fair := st.Receipt()
		fair.Nonce, fair.AccumulatedAmount = 2, 15_000
		signed, _ := channel.Sign(t.Context(), signer, fair)
		signed.Signature[3] ^= 1
		h, _ := channel.EncodeHeader(&channel.Payload{Version: 1, ClientTxRef: "t1", SignedSubRAV: &signed})
		return h
	}()
	otherChannel := st.Receipt()
	otherChannel.ChannelID[0] ^= 1
	otherChannel.Nonce, otherChannel.AccumulatedAmount = 2, 20_000
	wrongNonce := next
	wrongNonce.Nonce = 3
	for _, c := range []struct {
		name, header string
		status       int
		code         channel.Code
		state        bool
	}{
		{"tampered signature", tampered, http.StatusBadRequest, channel.CodeInvalidSignature, true},
		{"wrong channel", raw.header(otherChannel, "t2"), http.StatusNotFound, channel.CodeNotFound, false},
		{"wrong nonce", raw.header(wrongNonce, "t3"), http.StatusConflict, channel.CodeConflict, true},
		{"over deposit", raw.header(next, "t4"), http.StatusPaymentRequired, channel.CodeInsufficientFunds, true},
		{"accepted already", raw.header(st.Receipt(), "t5"), http.StatusConflict, channel.CodeDuplicate, true},
		{"not a payload", "uXXXX", http.StatusBadRequest, channel.CodeMalformed, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := raw.post(translateCall, c.header)
			if resp.StatusCode != c.status {
				t.Fatalf("HTTP %d %s, want %d", resp.StatusCode, body, c.status)
			}
			p, err := channel.DecodeHeader(resp.Header.Get(channel.Header))
			if err != nil || p.Error == nil || p.Error.Code != c.code {
				t.Fatalf("header payload %+v (%v), want error %s", p, err, c.code)
			}
			if want, _ := channel.MarshalPayload(&p); string(body) != string(want) {
				t.Fatalf("body %s, want the header's payload %s", body, want)
			}
			if c.state != (p.SubRAV != nil) {
				t.Fatalf("state %+v, want one: %v", p.SubRAV, c.state)
			}
			if c.state && (p.SubRAV.Nonce != 1 || p.SubRAV.AccumulatedAmount != 10_000 || p.Deposit != 15_000) {
				t.Fatalf("state %+v deposit %d, want nonce 1, 10000 of 15000 msat", p.SubRAV, p.Deposit)
			}
		})
	}
	if n := b.up.calls.Load(); n != 1 {
		t.Fatalf("translate ran %d times, want once (the first, paid call)", n)
	}
	server, err := b.books.Get(t.Context(), signer.PublicKey().Bytes, st.Channel)
	if err != nil || server.Nonce != 1 || server.Accumulated != 10_000 {
		t.Fatalf("the server's books: %+v, %v", server, err)
	}
}

// TestChannelHTTP_AnswerCarriesTheNextState: an accepted receipt's answer
// carries the channel's state after the call, its cost and deposit, and
// the call runs once.
func TestChannelHTTP_AnswerCarriesTheNextState(t *testing.T) {
	b := newChannelBench(t, true)
	signer := newSigner(t)
	st := b.openOne(t, signer, 100)
	raw := newRawChannel(t, b.ep.URL, signer)
	r := st.Receipt()
	r.Nonce, r.AccumulatedAmount = 2, 20_000
	resp, body := raw.post(translateCall, raw.header(r, "ok-1"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "fr:x") {
		t.Fatalf("HTTP %d %s", resp.StatusCode, body)
	}
	p, err := channel.DecodeHeader(resp.Header.Get(channel.Header))
	if err != nil || p.Error != nil || p.SubRAV == nil || *p.SubRAV != r || p.Cost != 10_000 || p.Deposit != 100_000 || p.ClientTxRef != "ok-1" {
		t.Fatalf("answer payload %+v (%v)", p, err)
	}
	if n := b.up.calls.Load(); n != 2 {
		t.Fatalf("translate ran %d times, want 2", n)
	}
}

// TestChannelHTTP_ConcurrentCallsNeverDebitTwice: one receipt sent twice
// at once pays for one run; calls racing through one buyer each run once
// paid or are refused, and the books hold exactly the runs' prices.
func TestChannelHTTP_ConcurrentCallsNeverDebitTwice(t *testing.T) {
	t.Run("one receipt twice", func(t *testing.T) {
		b := newChannelBench(t, true)
		signer := newSigner(t)
		st := b.openOne(t, signer, 100)
		r := st.Receipt()
		r.Nonce, r.AccumulatedAmount = 2, 20_000
		raws := []*rawChannel{newRawChannel(t, b.ep.URL, signer), newRawChannel(t, b.ep.URL, signer)}
		h := raws[0].header(r, "same")
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, raw := range raws {
			wg.Go(func() {
				resp, _ := raw.post(translateCall, h)
				statuses[i] = resp.StatusCode
			})
		}
		wg.Wait()
		ok := 0
		for _, s := range statuses {
			switch s {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
			default:
				t.Fatalf("statuses %v", statuses)
			}
		}
		if ok != 1 || b.up.calls.Load() != 2 {
			t.Fatalf("statuses %v, %d runs; want one 200 and 2 runs in all", statuses, b.up.calls.Load())
		}
		server, _ := b.books.Get(t.Context(), signer.PublicKey().Bytes, st.Channel)
		if server.Nonce != 2 || server.Accumulated != 20_000 {
			t.Fatalf("books %+v, want nonce 2, 20000 msat", server)
		}
	})
	t.Run("calls racing through one buyer", func(t *testing.T) {
		b := newChannelBench(t, true)
		signer := newSigner(t)
		buyer := b.buyer(signer, 1000, nil)
		cs := b.connect(t, buyer)
		call(t, cs, "translate", map[string]any{"text": "open"})
		var wg sync.WaitGroup
		var ran, refused atomic.Int64
		for range 8 {
			wg.Go(func() {
				_, err := tryCall(cs, "translate", map[string]any{"text": "race"})
				var werr *jsonrpc.Error
				switch {
				case err == nil:
					ran.Add(1)
				case errors.As(err, &werr) && werr.Code == cep8.CodeChannelRefused:
					refused.Add(1)
				default:
					t.Errorf("a racing call: %v", err)
				}
			})
		}
		wg.Wait()
		st, _ := buyer.Channel(t.Context())
		server, err := b.books.Get(t.Context(), signer.PublicKey().Bytes, st.Channel)
		runs := b.up.calls.Load()
		if err != nil || runs != 1+ran.Load() || server.Accumulated != uint64(runs)*10_000 || server.Nonce != uint64(runs) {
			t.Fatalf("%d runs (%d ran, %d refused), books %+v (%v): every run paid once", runs, ran.Load(), refused.Load(), server, err)
		}
		if b.paid.Load() != 1 {
			t.Fatalf("the client's wallet paid %d times, want once", b.paid.Load())
		}
	})
}

// TestChannelHTTP_ResyncsFromARefusal: a buyer whose stored state is
// behind (another buyer of the same key spent on the channel) is refused,
// takes the server's state and pays with the next receipt.
func TestChannelHTTP_ResyncsFromARefusal(t *testing.T) {
	b := newChannelBench(t, true)
	signer := newSigner(t)
	store := durable.NewMemory(durable.Options{})
	first := b.buyer(signer, 100, store)
	csFirst := b.connect(t, first)
	call(t, csFirst, "translate", map[string]any{"text": "a"})
	second := b.buyer(signer, 100, store)
	if st, ok := second.Channel(t.Context()); !ok || st.Nonce != 1 {
		t.Fatalf("the second buyer's stored channel: %+v, %v", st, ok)
	}
	// Four receipts the second buyer never hears of: more than it could
	// guess its way past by counting up.
	for range 4 {
		call(t, csFirst, "translate", map[string]any{"text": "b"})
	}
	if got := call(t, b.connect(t, second), "translate", map[string]any{"text": "c"}); got != "fr:c" {
		t.Fatalf("the second buyer's call: %q", got)
	}
	st, _ := second.Channel(t.Context())
	if st.Nonce != 6 || st.Accumulated != 60_000 || b.up.calls.Load() != 6 || b.paid.Load() != 1 {
		t.Fatalf("state %+v, %d runs, %d payments; want nonce 6, 6 runs, one payment", st, b.up.calls.Load(), b.paid.Load())
	}
}

// TestChannelHTTP_ServerWithoutChannelsPaidByQuotation: a buyer that pays
// by channel, at a server that offers none, is asked for a quotation as
// before and buys one.
func TestChannelHTTP_ServerWithoutChannelsPaidByQuotation(t *testing.T) {
	b := newChannelBench(t, false)
	buyer := b.buyer(newSigner(t), 100, nil)
	cs := b.connect(t, buyer)
	exp, _ := json.Marshal(cs.InitializeResult().Capabilities.Experimental["nip10"])
	if strings.Contains(string(exp), channel.PMI) {
		t.Fatalf("a server without channels offers them: %s", exp)
	}
	args := map[string]any{"text": "q"}
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "translate", Arguments: args})
	if !quotation.IsRequired(err) {
		t.Fatalf("a call by channel to a server without: %v, want a quotation required", err)
	}
	id, err := buyer.Buy(t.Context(), "translate", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "translate", Arguments: args, Meta: mcp.Meta{quotation.MetaQuotation: id}})
	if err != nil || res.IsError || b.up.calls.Load() != 1 || b.paid.Load() != 1 {
		t.Fatalf("paid by quotation: %v %+v, %d runs, %d payments", err, res, b.up.calls.Load(), b.paid.Load())
	}
	if _, ok := buyer.Channel(t.Context()); ok {
		t.Fatal("a channel was opened with a server that has none")
	}
}

// TestChannelHTTP_InitializeOffersThePMI: a server with channels lists
// channel.PMI among experimental.nip10's payment methods.
func TestChannelHTTP_InitializeOffersThePMI(t *testing.T) {
	b := newChannelBench(t, true)
	cs := b.connect(t, b.buyer(newSigner(t), 100, nil))
	exp, _ := json.Marshal(cs.InitializeResult().Capabilities.Experimental["nip10"])
	if want := `{"auth":["DIDAuthV1"],"payment":["quotation","` + channel.PMI + `"]}`; string(exp) != want {
		t.Fatalf("experimental.nip10 = %s, want %s", exp, want)
	}
}

// TestChannelHTTP_TopUpWhenTheDepositIsSpent: a call the deposit no longer
// covers tops the channel up (a second payment, the same channel) and
// runs; closing a channel spent to the last msat refunds nothing.
func TestChannelHTTP_TopUpWhenTheDepositIsSpent(t *testing.T) {
	b := newChannelBench(t, true)
	signer := newSigner(t)
	buyer := b.buyer(signer, 15, nil)
	cs := b.connect(t, buyer)
	call(t, cs, "translate", map[string]any{"text": "1"})
	opened, _ := buyer.Channel(t.Context())
	for _, text := range []string{"2", "3"} {
		call(t, cs, "translate", map[string]any{"text": text})
	}
	st, _ := buyer.Channel(t.Context())
	if st.Channel != opened.Channel || st.Deposit != 30_000 || st.Accumulated != 30_000 || b.paid.Load() != 2 || b.up.calls.Load() != 3 {
		t.Fatalf("state %+v (opened %s), %d payments, %d runs; want one channel topped up to 30000 msat, 2 payments, 3 runs",
			st, opened.Channel, b.paid.Load(), b.up.calls.Load())
	}
	before := b.balance(t, "client")
	closed, err := buyer.CloseChannel(t.Context())
	if err != nil || closed.Owed != 0 || b.balance(t, "client") != before {
		t.Fatalf("close: %+v, %v; balance %d, was %d", closed, err, b.balance(t, "client"), before)
	}
}

// idleTTL is the books' idle TTL on a clock of the test's (newChannelBenchAt):
// shorter than a refund invoice's life, so that the invoice made now is
// still good on the books' clock moved past the TTL.
const idleTTL = 5 * time.Minute

// TestChannelHTTP_IdleChannelRefundedOnNextContact: a channel the server
// closed, idle past its TTL, is refunded when the buyer next calls (its
// refusal, CHANNEL_CLOSED, says what is owed), and the call goes on over a
// new channel.
func TestChannelHTTP_IdleChannelRefundedOnNextContact(t *testing.T) {
	var skew atomic.Int64
	b := newChannelBenchAt(t, true, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	signer := newSigner(t)
	buyer := b.buyer(signer, 100, nil)
	cs := b.connect(t, buyer)
	call(t, cs, "translate", map[string]any{"text": "before"})
	first, _ := buyer.Channel(t.Context())
	afterDeposit := b.balance(t, "client")
	skew.Store(int64(idleTTL + time.Second))
	if got := call(t, cs, "translate", map[string]any{"text": "after"}); got != "fr:after" {
		t.Fatalf("the call after the server closed the channel: %q", got)
	}
	second, _ := buyer.Channel(t.Context())
	old, err := b.books.Get(t.Context(), signer.PublicKey().Bytes, first.Channel)
	if err != nil || !old.Closed || old.Refund != channel.RefundPaid || old.Owed != 90_000 {
		t.Fatalf("the idle channel: %+v, %v; want closed, 90000 msat refunded", old, err)
	}
	// The refund came in, the new channel's deposit went out.
	if got := b.balance(t, "client"); got != afterDeposit+90_000-100_000 || second.Channel == first.Channel || b.up.calls.Load() != 2 {
		t.Fatalf("client balance %d (after the first deposit %d), channels %s then %s, %d runs", got, afterDeposit, first.Channel, second.Channel, b.up.calls.Load())
	}
}
