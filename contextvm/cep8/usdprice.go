package cep8

import (
	"context"
	"fmt"
	"math/big"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
)

// usdLimit is the limit of a call's price as the client knows it (the cap
// tag seen); a call whose price it does not know has none (ok false): its
// amount is held to the budget only, as every sats price is.
func (p *Payer) usdLimit(ctx context.Context, call *contextvm.PaidCall) (l USDLimit, ok bool, err error) {
	price, known := call.Price()
	if !known {
		return USDLimit{}, false, nil
	}
	return p.opts.USDLimit(ctx, price)
}

// USDLimit is what the client holds a server to for a price the server
// announced in usd: every rail states sats, converted at the server's
// rate, and the client pays at most its tolerance above the price
// converted at its own rate (payments.MostToPay, at the top of a range).
// ok is false for a price not in usd, or unreadable: its amount is held
// to the budget only, as every sats price is. err, which wraps
// payments.ErrNoRate, says the client has no rate to check with: nothing
// is paid. Over Nostr the price is the cap tag's, over MCP HTTP the
// tool's _meta["nip10/price"] (package payments/quotation).
func (o *PayOptions) USDLimit(ctx context.Context, price contextvm.Price) (l USDLimit, ok bool, err error) {
	if o == nil || price.Unit != payments.UnitUSD {
		return USDLimit{}, false, nil
	}
	_, hi, err := price.Range()
	if err != nil {
		return USDLimit{}, false, nil // an unreadable price: the budget decides, as before
	}
	l.price, l.tolerance = price, payments.Tolerance(o.Tolerance)
	if o.Rates == nil {
		return l, true, fmt.Errorf("%w: %s costs %s usd, and this client has no usd rate source to check the sats asked for it",
			payments.ErrNoRate, price.Capability, price.Amount)
	}
	if l.rate, err = o.Rates.USDPerBTC(ctx); err != nil {
		return l, true, fmt.Errorf("%w: %s costs %s usd; the usd rate source failed: %w", payments.ErrNoRate, price.Capability, price.Amount, err)
	}
	if l.Most, err = payments.MostToPay(payments.Exact(hi), l.rate, l.tolerance); err != nil {
		return l, true, err
	}
	return l, true, nil
}

// USDLimit is a usd price converted at the client's rate.
type USDLimit struct {
	price     contextvm.Price
	rate      *big.Rat // usd a bitcoin
	tolerance float64
	// Most is the most the client pays for the price, in sats.
	Most int64
}

// Check refuses an amount in sats asked above the limit (wrapping
// payments.ErrOverRate); the zero USDLimit, of a price not in usd, has
// none.
func (l USDLimit) Check(sats int64) error {
	if l.rate == nil || sats <= l.Most {
		return nil
	}
	return fmt.Errorf("%w: the server asks %d sats for %s usd; at this client's rate of %s usd a bitcoin that is at most %d sats (%g%% tolerance)",
		payments.ErrOverRate, sats, l.price.Amount, l.rate.FloatString(2), l.Most, l.tolerance*100)
}
