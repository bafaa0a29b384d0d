package catalogpage

import (
	"context"
	"log/slog"
	"math/big"

	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/payments"
)

// usdRate is the rate one listing shows usd prices at: asked of the page's
// Rates once, at the first usd price, and not again when it failed (the
// prices are then shown in usd only).
type usdRate struct {
	rates  payments.Rates
	log    *slog.Logger
	asked  bool
	usdBTC *big.Rat
}

// rate is the rate to show price at, nil when it is not in usd or there
// is none.
func (u *usdRate) rate(ctx context.Context, price *discovery.Price) *big.Rat {
	if u.rates == nil || price == nil || price.Unit != payments.UnitUSD {
		return nil
	}
	if !u.asked {
		u.asked = true
		r, err := u.rates.USDPerBTC(ctx)
		if err != nil {
			u.log.Warn("usd prices shown in usd only: no usd rate", "err", err)
		}
		u.usdBTC = r
	}
	return u.usdBTC
}
