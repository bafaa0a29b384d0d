package cep8_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rate is a payments.Rates at a fixed price (usd a bitcoin), or failing.
type rate struct {
	usd string
	err error
}

func (r rate) USDPerBTC(context.Context) (*big.Rat, error) {
	if r.err != nil {
		return nil, r.err
	}
	v, _ := new(big.Rat).SetString(r.usd)
	return v, nil
}

// usdFixture serves tool:count at 0.05 usd, converted at server (nil:
// no rate source), to a client paying from 1000 sats that converts at
// client; the client has listed the tools, and so knows the price.
func usdFixture(t *testing.T, server, client payments.Rates, explicit bool) (*peertest.PayFixture, *mcp.ClientSession) {
	f := peertest.NewPayFixture(t, 1000)
	opts := f.ServerOptions(0, "tool:count=0.05:usd")
	gopts := f.GateOptions(0)
	gopts.Rates = server
	opts.Gate = cep8.NewGate(gopts)
	srv := peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
	cs := f.Client(t, srv, &cep8.PayOptions{
		Handlers:       []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget:         &payments.Budget{PerCall: 500},
		Rates:          client,
		ExplicitGating: explicit,
	})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return f, cs
}

// A usd price is asked for in sats at the server's rate, rounded up, and
// paid exactly when the client's own conversion agrees: 0.05 usd at
// 50 000 usd a bitcoin is 100 sats; at 49 500 it is 101.01…, so 102,
// within 2% of the client's 100.
func TestPayUSD_ServerAsksTheConvertedSats(t *testing.T) {
	for _, tc := range []struct {
		name     string
		server   string
		explicit bool
		want     int64
	}{
		{"transparent", "50000", false, 100},
		{"explicit gating", "50000", true, 100},
		{"rounded up, within the tolerance", "49500", false, 102},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, cs := usdFixture(t, rate{usd: tc.server}, rate{usd: "50000"}, tc.explicit)
			if _, err := peertest.Call(cs, "count", nil); err != nil {
				t.Fatal(err)
			}
			if a, s := f.Balances(t); a != 1000-tc.want || s != tc.want {
				t.Fatalf("balances alice %d srv %d; want %d paid", a, s, tc.want)
			}
			if n := f.Calls.Load(); n != 1 {
				t.Fatalf("%d runs", n)
			}
		})
	}
}

// The client refuses an amount more than its tolerance above the price at
// its own rate (a server whose rate says 48 000 asks 105 sats where the
// client's 50 000 allows 102), and pays nothing without a rate of its own.
func TestPayUSD_ClientDeclinesWhatItCannotCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client payments.Rates
		reason string
		says   string
	}{
		{"over the tolerance", rate{usd: "50000"}, contextvm.DeclinedOverRate, "asks 105 sats for 0.05 usd"},
		{"no rate source", nil, contextvm.DeclinedNoRate, "no usd rate source"},
		{"a failing rate source", rate{err: errors.New("rate endpoint down")}, contextvm.DeclinedNoRate, "rate endpoint down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, cs := usdFixture(t, rate{usd: "48000"}, tc.client, false)
			_, err := peertest.Call(cs, "count", nil)
			d, ok := contextvm.Declined(err)
			if !ok || d.Reason != tc.reason || d.Amount != 105 || d.Unit != "sats" || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v (%+v), want declined %s saying %q", err, d, tc.reason, tc.says)
			}
			if a, s := f.Balances(t); a != 1000 || s != 0 || f.Calls.Load() != 0 {
				t.Fatalf("balances alice %d srv %d, %d runs: something was paid or run", a, s, f.Calls.Load())
			}
		})
	}
}

// A server without a usd rate, or whose rate source fails, answers
// CodePriceRefused before asking for anything, and runs nothing; the
// source's error (whose URL may hold a key) stays out of the answer.
func TestPayUSD_ServerWithoutARateRefusesBeforeCharging(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server payments.Rates
	}{
		{"no rate source", nil},
		{"a failing rate source", rate{err: errors.New("https://rates.example/?key=SECRET: status 500")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, cs := usdFixture(t, tc.server, rate{usd: "50000"}, false)
			_, err := peertest.Call(cs, "count", nil)
			if peertest.RPCCode(err) != contextvm.CodePriceRefused || !strings.Contains(err.Error(), "priced in usd") || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("got %v", err)
			}
			if a, s := f.Balances(t); a != 1000 || s != 0 || f.Calls.Load() != 0 {
				t.Fatalf("balances alice %d srv %d, %d runs", a, s, f.Calls.Load())
			}
		})
	}
}

// A channel's receipts pay a usd price at the server's conversion: 0.01
// usd at 500 000 usd a bitcoin is 2 sats a call, five calls one deposit
// of 50 sats and 10 000 msat of receipts. A client whose own rate makes
// the price 0.5 sats (2 000 000) refuses the deposit whose call costs 2:
// nothing is paid, nothing runs.
func TestPayUSD_ChannelReceiptsAtTheConvertedPrice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client string
		ok     bool
	}{
		{"the same rate", "500000", true},
		{"a client rate that halves the price", "2000000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newChanFixture(t, 100_000)
			f.countPrice, f.rates = "0.01:usd", rate{usd: "500000"}
			f.serve(t, durable.NewMemory(durable.Options{}))
			pay := f.channelPay(nil)
			pay.Rates = rate{usd: tc.client}
			opts := f.clientOptions(pay)
			cs := peertest.Connect(t, opts)
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				_, err := peertest.Call(cs, "count", nil)
				if d, ok := contextvm.Declined(err); !ok || d.Reason != contextvm.DeclinedOverRate {
					t.Fatalf("got %v (%+v), want over-rate", err, d)
				}
				f.wantBalances(t, "after the refusal", 100_000, 0)
				if f.runs.Load() != 0 {
					t.Fatal("the call ran")
				}
				return
			}
			f.count(t, cs, 5)
			if f.runs.Load() != 5 || f.settled.Load() != 1 {
				t.Fatalf("%d runs, %d Lightning payments; want 5 runs on one payment", f.runs.Load(), f.settled.Load())
			}
			st, ok := opts.Payer.(*cep8.Payer).Channel(context.Background(), f.sk.Public())
			if !ok || st.Nonce != 5 || st.Accumulated != 10_000 {
				t.Fatalf("client's channel %+v (%v); want 5 receipts of 2000 msat", st, ok)
			}
		})
	}
}

// movingRate is a payments.Rates whose price a test changes.
type movingRate struct{ usd atomic.Value } // string

func (m *movingRate) USDPerBTC(ctx context.Context) (*big.Rat, error) {
	return rate{usd: m.usd.Load().(string)}.USDPerBTC(ctx)
}

// Once a channel is open, a receipt is held to the client's rate too: the
// server's rate halves (0.01 usd becomes 4 sats, the client's bound 3),
// the server refuses the 2-sat receipt and states 4, and the client signs
// no receipt for that; the invoice that follows is declined. Only the
// first call's 2 sats were spent from the channel.
func TestPayUSD_ChannelReceiptsHeldToTheClientsRate(t *testing.T) {
	f := newChanFixture(t, 100_000)
	server := &movingRate{}
	server.usd.Store("500000")
	f.countPrice, f.rates = "0.01:usd", server
	f.serve(t, durable.NewMemory(durable.Options{}))
	pay := f.channelPay(nil)
	pay.Budget.PerCall = 10
	pay.Rates = rate{usd: "500000"}
	opts := f.clientOptions(pay)
	cs := peertest.Connect(t, opts)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.count(t, cs, 1)
	server.usd.Store("250000")
	_, err := peertest.Call(cs, "count", nil)
	if d, ok := contextvm.Declined(err); !ok || d.Reason != contextvm.DeclinedOverRate {
		t.Fatalf("got %v (%+v), want over-rate", err, d)
	}
	st, ok := opts.Payer.(*cep8.Payer).Channel(context.Background(), f.sk.Public())
	if !ok || st.Accumulated != 2_000 || f.runs.Load() != 1 {
		t.Fatalf("client's channel %+v (%v), %d runs; want one call's 2000 msat", st, ok, f.runs.Load())
	}
}
