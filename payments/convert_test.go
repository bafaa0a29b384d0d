package payments_test

import (
	"context"
	"errors"
	"math/big"
	"testing"

	"github.com/cvmgo/cvm/payments"
)

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// The rounding rule: whole sats, rounded up, computed on the decimals as
// written (0.05 as a float64 would round up to one sat too many).
func TestSatsFor_RoundsUpToWholeSats(t *testing.T) {
	for _, tc := range []struct {
		usd, rate string
		want      int64
	}{
		{"0.05", "50000", 100},            // exact: no sat added
		{"0.05", "97123.45", 52},          // 51.48…: up
		{"0.0005", "100000", 1},           // half a sat: one
		{"0.000001", "100000", 1},         // a thousandth of a sat: one
		{"0", "97000", 0},                 // free stays free
		{"1", "1", 100_000_000},           // a dollar at a dollar a bitcoin
		{"0.07", "70000", 100},            // 0.07 is not exact in binary
		{"19.99", "99950", 20000},         // 19 999.999… → 20 000, exactly 20000
		{"0.1", "30000", 334},             // 333.33… → 334
		{"123.456789", "65432.1", 188680}, // 188 679.24… → 188 680
	} {
		f, _ := rat(tc.usd).Float64()
		got, err := payments.SatsFor(payments.Exact(f), rat(tc.rate))
		if err != nil || got != tc.want {
			t.Errorf("%s usd at %s: %d %v, want %d", tc.usd, tc.rate, got, err, tc.want)
		}
	}
}

func TestMostToPay_AddsTheTolerance(t *testing.T) {
	for _, tc := range []struct {
		usd, rate string
		tol       float64
		want      int64
	}{
		{"0.05", "50000", 0.02, 102},
		{"0.05", "50000", 0, 100},
		{"0.05", "50000", -1, 100}, // negative: none
		{"0.0005", "100000", 0.02, 1},
		{"0.05", "97123.45", 0.02, 53}, // 52.51… → 53: the server's 52 passes
	} {
		got, err := payments.MostToPay(rat(tc.usd), rat(tc.rate), tc.tol)
		if err != nil || got != tc.want {
			t.Errorf("%s usd at %s, tolerance %g: %d %v, want %d", tc.usd, tc.rate, tc.tol, got, err, tc.want)
		}
	}
}

func TestSatsFor_RefusesNoRateAndOverflow(t *testing.T) {
	if _, err := payments.SatsFor(rat("1"), rat("0")); !errors.Is(err, payments.ErrNoRate) {
		t.Errorf("zero rate: %v", err)
	}
	if _, err := payments.SatsFor(rat("1"), nil); !errors.Is(err, payments.ErrNoRate) {
		t.Errorf("nil rate: %v", err)
	}
	if _, err := payments.SatsFor(rat("9007199254740992"), rat("0.0001")); !errors.Is(err, payments.ErrOutOfRange) {
		t.Errorf("overflow: %v", err)
	}
}

type fixedRate struct {
	rate *big.Rat
	err  error
}

func (f fixedRate) USDPerBTC(context.Context) (*big.Rat, error) { return f.rate, f.err }

func TestCap_InSats(t *testing.T) {
	ctx := context.Background()
	usd := payments.Cap{Capability: "tool:a", Low: 0.05, High: 0.1, Unit: payments.UnitUSD}
	got, err := usd.InSats(ctx, fixedRate{rate: rat("50000")})
	if err != nil || got.Low != 100 || got.High != 200 || got.Unit != "sats" || got.Capability != "tool:a" {
		t.Fatalf("%+v %v", got, err)
	}
	sats := payments.Cap{Capability: "tool:b", Low: 7, High: 7, Unit: "sats"}
	if got, err := sats.InSats(ctx, nil); err != nil || got != sats {
		t.Fatalf("a sats cap: %+v %v", got, err)
	}
	if _, err := usd.InSats(ctx, nil); !errors.Is(err, payments.ErrNoRate) {
		t.Fatalf("no rate source: %v", err)
	}
	down := errors.New("down")
	if _, err := usd.InSats(ctx, fixedRate{err: down}); !errors.Is(err, payments.ErrNoRate) || !errors.Is(err, down) {
		t.Fatalf("a failing rate source: %v", err)
	}
}
