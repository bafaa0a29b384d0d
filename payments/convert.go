package payments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// UnitUSD is the one unit besides sats a price may be announced in (seed
// 000's cap tag example: "sats" and "usd"). Nothing is paid in it: every
// rail states and moves sats, converted from the usd price where the
// payment is asked for (see Rates and docs/protocol-compatibility.md).
const UnitUSD = "usd"

// Rates is where a server or a client learns what a bitcoin costs in US
// dollars, to convert usd prices into sats (package payments/usdrate
// fetches it from an endpoint the operator names). It is called for each
// usd-priced payment, possibly concurrently; an implementation caches.
type Rates interface {
	// USDPerBTC is the price of one bitcoin in US dollars now, above
	// zero; an error when it cannot be known, which refuses the payment:
	// a rate is never guessed.
	USDPerBTC(ctx context.Context) (*big.Rat, error)
}

// Errors of conversion.
var (
	// ErrNoRate: a usd price cannot be converted, because there is no
	// rate source or it failed. Nothing is paid.
	ErrNoRate = errors.New("no usd rate to convert the price into sats")
	// ErrOverRate: the amount a server states for a usd price is more
	// than the tolerance above what the price comes to at the client's
	// own rate. Nothing is paid.
	ErrOverRate = errors.New("the amount asked is above the usd price at this client's rate")
)

// DefaultTolerance is how far above its own conversion of a usd price a
// client accepts the amount a server states: 2%, about what two rate
// sources a minute apart differ by on a volatile day, and small enough
// that a server cannot overcharge by much with a rate of its own making.
const DefaultTolerance = 0.02

// satsPerBTC is how many sats one bitcoin is.
var satsPerBTC = big.NewRat(100_000_000, 1)

// Exact is f as the decimal it was written as: prices and tolerances are
// read into float64s, and 0.05 as a float64 is a hair above 0.05, which,
// converted and rounded up, would charge a sat more than the price. The
// shortest decimal that reads back as f is the one the operator wrote.
func Exact(f float64) *big.Rat {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok { // NaN or an infinity: no price is either
		return new(big.Rat)
	}
	return r
}

// SatsFor is usd US dollars in sats at usdPerBTC dollars a bitcoin,
// rounded up to a whole sat: ceil(usd × 100 000 000 / usdPerBTC). Whole
// sats because every amount a rail states, and every budget, is whole
// sats; up, because a server that charged less than its price would lose
// on every call, and never by more than one sat. The error is ErrNoRate
// for a rate that is not above zero, or an amount past any int64.
func SatsFor(usd, usdPerBTC *big.Rat) (int64, error) {
	return satsCeil(usd, usdPerBTC, new(big.Rat))
}

// MostToPay is the most a client pays for a price of usd US dollars at
// its own rate of usdPerBTC: the converted amount raised by tolerance (a
// fraction: 0.02 is 2%; none when negative), rounded up to a whole sat,
// so that a server's own rounding up always passes.
func MostToPay(usd, usdPerBTC *big.Rat, tolerance float64) (int64, error) {
	if tolerance < 0 || math.IsNaN(tolerance) {
		tolerance = 0
	}
	return satsCeil(usd, usdPerBTC, Exact(tolerance))
}

// Tolerance is the tolerance an options struct's field t means:
// DefaultTolerance when zero (unset), none when negative.
func Tolerance(t float64) float64 {
	switch {
	case t == 0:
		return DefaultTolerance
	case t < 0 || math.IsNaN(t):
		return 0
	}
	return t
}

func satsCeil(usd, usdPerBTC, tolerance *big.Rat) (int64, error) {
	if usdPerBTC == nil || usdPerBTC.Sign() <= 0 {
		return 0, fmt.Errorf("%w: a rate of %v usd per bitcoin", ErrNoRate, usdPerBTC)
	}
	if usd.Sign() < 0 {
		return 0, fmt.Errorf("%w: a price of %s usd", ErrNegative, usd.FloatString(2))
	}
	v := new(big.Rat).Mul(usd, satsPerBTC)
	v.Quo(v, usdPerBTC)
	v.Mul(v, new(big.Rat).Add(big.NewRat(1, 1), tolerance))
	q, m := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("%w: %s usd is more sats than any amount can be", ErrOutOfRange, usd.FloatString(2))
	}
	return q.Int64(), nil
}

// InSats is c converted into sats: a usd cap at the rate rates gives now
// (each end rounded up, see SatsFor), a sats cap as it is. A cap in any
// other unit is returned as it is, for the rail to refuse. Without rates,
// or when they fail, a usd cap is ErrNoRate.
func (c Cap) InSats(ctx context.Context, rates Rates) (Cap, error) {
	if c.Unit != UnitUSD {
		return c, nil
	}
	if rates == nil {
		return Cap{}, fmt.Errorf("%w: %s is priced in usd and no rate source is configured", ErrNoRate, c.Capability)
	}
	rate, err := rates.USDPerBTC(ctx)
	if err != nil {
		return Cap{}, fmt.Errorf("%w: %w", ErrNoRate, err)
	}
	lo, err := SatsFor(Exact(c.Low), rate)
	if err != nil {
		return Cap{}, err
	}
	hi, err := SatsFor(Exact(c.High), rate)
	if err != nil {
		return Cap{}, err
	}
	return Cap{Capability: c.Capability, Low: float64(lo), High: float64(hi), Unit: "sats"}, nil
}
