package cep8

import (
	"context"
	"fmt"
	"math/big"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
)

// usdLimit is what the client holds a server to for a call whose price
// the server announced in usd: every rail states sats, converted at the
// server's rate, and the client pays at most its tolerance above the
// price converted at its own rate (payments.MostToPay, at the top of a
// range). ok is false for a call whose price is not in usd, or not known
// to the client (no cap tag seen): its amount is held to the budget only,
// as every sats price is. err, which wraps payments.ErrNoRate, says the
// client has no rate to check with: nothing is paid.
func (p *Payer) usdLimit(ctx context.Context, call *contextvm.PaidCall) (l usdLimit, ok bool, err error) {
	price, known := call.Price()
	if !known || price.Unit != payments.UnitUSD {
		return usdLimit{}, false, nil
	}
	_, hi, err := price.Range()
	if err != nil {
		return usdLimit{}, false, nil // an unreadable price: the budget decides, as before
	}
	l.price, l.tolerance = price, payments.Tolerance(p.opts.Tolerance)
	if p.opts.Rates == nil {
		return l, true, fmt.Errorf("%w: %s costs %s usd, and this client has no usd rate source to check the sats asked for it",
			payments.ErrNoRate, price.Capability, price.Amount)
	}
	if l.rate, err = p.opts.Rates.USDPerBTC(ctx); err != nil {
		return l, true, fmt.Errorf("%w: %s costs %s usd; the usd rate source failed: %w", payments.ErrNoRate, price.Capability, price.Amount, err)
	}
	if l.most, err = payments.MostToPay(payments.Exact(hi), l.rate, l.tolerance); err != nil {
		return l, true, err
	}
	return l, true, nil
}

// usdLimit is a usd price converted at the client's rate.
type usdLimit struct {
	price     contextvm.Price
	rate      *big.Rat // usd a bitcoin
	tolerance float64
	most      int64 // sats
}

// check refuses an amount asked above the limit; it has none for a call
// not priced in usd (the zero usdLimit).
func (l usdLimit) check(sats int64) error {
	if l.rate == nil || sats <= l.most {
		return nil
	}
	return fmt.Errorf("%w: the server asks %d sats for %s usd; at this client's rate of %s usd a bitcoin that is at most %d sats (%g%% tolerance)",
		payments.ErrOverRate, sats, l.price.Amount, l.rate.FloatString(2), l.most, l.tolerance*100)
}
