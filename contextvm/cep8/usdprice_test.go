package cep8_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
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
