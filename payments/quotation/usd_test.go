package quotation_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type usdRate struct {
	rate *big.Rat
	err  error
}

func (u usdRate) USDPerBTC(context.Context) (*big.Rat, error) { return u.rate, u.err }

// usdDesk sells "translate" at 0.05 usd, converted at rates.
func usdDesk(t *testing.T, rates payments.Rates) *quotation.Desk {
	t.Helper()
	n, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.AddWallet("server", 0)
	sw, _ := n.Wallet("server")
	d, err := quotation.New(quotation.Options{
		Store:     durable.NewMemory(durable.Options{}),
		Processor: lightning.NewProcessor(sw, lightning.ProcessorOptions{PollMin: time.Millisecond}),
		Prices:    map[string]payments.Cap{"translate": {Capability: "tool:translate", Low: 0.05, High: 0.05, Unit: payments.UnitUSD}},
		Rates:     rates,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A usd price is quoted in sats at the desk's rate: 0.05 usd at 50 000
// usd a bitcoin is 100 sats, the invoice's amount.
func TestQuote_USDPriceQuotedInSats(t *testing.T) {
	q, err := usdDesk(t, usdRate{rate: big.NewRat(50_000, 1)}).Quote(context.Background(), alice, "translate", args)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := bolt11.Decode(q.Instructions.PayReq)
	if err != nil || q.Price.Amount != 100 || q.Price.Unit != "sats" || inv.AmountMsat() != 100_000 {
		t.Fatalf("quote %+v: %v", q, err)
	}
}

// Without a rate, or with a failing one, a usd price is not quoted
// (-32016), and the source's error stays out of the answer.
func TestQuote_USDPriceWithoutARate(t *testing.T) {
	for _, rates := range []payments.Rates{nil, usdRate{err: errors.New("https://rates.example/?key=SECRET")}} {
		_, err := usdDesk(t, rates).Quote(context.Background(), alice, "translate", args)
		wantErr(t, err, payments.ErrNoRate, -32016)
		if e := err.Error(); e == "" || strings.Contains(e, "SECRET") {
			t.Fatalf("error %q", e)
		}
	}
}

// listed is the tools of a tools/list answer annotated by a desk's HTTP,
// as a client reads them.
func listed(t *testing.T, d *quotation.Desk) []*mcp.Tool {
	t.Helper()
	out := quotation.HTTP{Desk: d}.Annotate("tools/list", json.RawMessage(`{"tools":[{"name":"translate","inputSchema":{"type":"object"}}]}`))
	var res mcp.ListToolsResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// A tool's _meta["nip10/price"] carries a usd price as the decimal it
// was written as (0.05, not 1), and a sats price as the whole number it
// always was; the client reads both back.
func TestAnnotate_PriceAsWritten(t *testing.T) {
	for _, tc := range []struct {
		desk       *quotation.Desk
		wire, want string
	}{
		{usdDesk(t, nil), `{"amount":0.05,"unit":"usd"}`, "0.05 usd"},
		{newRig(t, nil).desk, `{"amount":10,"unit":"sats"}`, "10 sats"},
	} {
		tools := listed(t, tc.desk)
		wire, _ := json.Marshal(tools[0].Meta[quotation.MetaPrice])
		p, ok := quotation.PriceOf(tools[0])
		if string(wire) != tc.wire || !ok || p.Amount+" "+p.Unit != tc.want || p.Capability != "tool:translate" {
			t.Errorf("_meta price %s, read as %+v %v; want %s, %s", wire, p, ok, tc.wire, tc.want)
		}
	}
}

// PriceOf reads what a server may put in _meta["nip10/price"]: decimals
// in any JSON spelling, ranges; what is no price is "?", which prices
// nothing (contextvm.Price.Range refuses it) and is shown as unknown.
func TestPriceOf(t *testing.T) {
	for meta, want := range map[string]string{
		`{"amount":0.05,"unit":"usd"}`:           "0.05 usd",
		`{"amount":5e-2,"unit":"usd"}`:           "0.05 usd",
		`{"amount":5,"max":10,"unit":"sats"}`:    "5-10 sats",
		`{"amount":5,"max":1,"unit":"sats"}`:     "5 sats",
		`{"amount":0.01,"max":0.1,"unit":"usd"}`: "0.01-0.1 usd",
		`{"amount":-1,"unit":"usd"}`:             "? ",
		`{"amount":"0.05","unit":"usd"}`:         "0.05 usd",
		`{"amount":1e300,"unit":"usd"}`:          "? ",
		`{"unit":"usd"}`:                         "? ",
		`"free"`:                                 "? ",
	} {
		var m any
		json.Unmarshal([]byte(meta), &m)
		p, ok := quotation.PriceOf(&mcp.Tool{Name: "t", Meta: mcp.Meta{quotation.MetaPrice: m}})
		if !ok || p.Amount+" "+p.Unit != want {
			t.Errorf("%s: %+v %v, want %q", meta, p, ok, want)
		}
	}
	if _, ok := quotation.PriceOf(&mcp.Tool{Name: "t"}); ok {
		t.Error("a tool without a price is priced")
	}
}

// Whatever the server's _meta, PriceOf does not panic, and an amount it
// reads is one contextvm.Price.Range reads.
func FuzzPriceOf(f *testing.F) {
	for _, s := range []string{`{"amount":0.05,"unit":"usd"}`, `{"amount":5,"max":10,"unit":"sats"}`, `{"amount":1e-400}`, `{"amount":9007199254740993}`, `[]`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, meta string) {
		var m any
		if json.Unmarshal([]byte(meta), &m) != nil {
			return
		}
		p, ok := quotation.PriceOf(&mcp.Tool{Name: "t", Meta: mcp.Meta{quotation.MetaPrice: m}})
		if !ok {
			t.Fatal("not priced")
		}
		if _, _, err := p.Range(); p.Amount != "?" && err != nil {
			t.Fatalf("%s read as %q: %v", meta, p.Amount, err)
		}
	})
}
