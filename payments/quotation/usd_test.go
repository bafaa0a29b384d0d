package quotation_test

import (
	"context"
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
