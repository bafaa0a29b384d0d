package main

import (
	"fmt"
	"math"
	"time"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/usdrate"
	"github.com/spf13/cobra"
)

// rateFlags name the usd rate source ([payments.usd-rate] in
// config.toml), which converts prices announced in usd into sats: a
// gateway's to ask for them, a client's to check what it is asked and to
// show prices in both units.
type rateFlags struct {
	url, pointer string
	ttl          time.Duration
	tolerance    float64 // clients only: percent
}

// addRateFlags defines the rate source's flags; a client's (paying) has
// the tolerance too.
func addRateFlags(cmd *cobra.Command, rf *rateFlags, paying bool) {
	f := cmd.Flags()
	f.StringVar(&rf.url, "usd-rate-url", "", "an HTTP(S) JSON endpoint giving the price of a bitcoin in usd, to convert usd prices into sats")
	f.StringVar(&rf.pointer, "usd-rate-pointer", "", "the JSON pointer (RFC 6901) to that price in the endpoint's answer, e.g. /data/amount")
	f.DurationVar(&rf.ttl, "usd-rate-ttl", usdrate.DefaultTTL, "how long a usd rate fetched is used")
	config.Bind(f, "usd-rate-url", "payments.usd-rate.url")
	config.Bind(f, "usd-rate-pointer", "payments.usd-rate.pointer")
	config.Bind(f, "usd-rate-ttl", "payments.usd-rate.ttl")
	if paying {
		f.Float64Var(&rf.tolerance, "usd-rate-tolerance", payments.DefaultTolerance*100, "pay for a usd price at most this many percent above the price at your own usd rate")
		config.Bind(f, "usd-rate-tolerance", "payments.usd-rate.tolerance")
	}
}

// usdRates is the rate source of rf, nil when none is configured.
func (a *app) usdRates(rf rateFlags) (*usdrate.Source, error) {
	if rf.url == "" {
		if rf.pointer != "" {
			return nil, fmt.Errorf("--usd-rate-pointer %q without --usd-rate-url (payments.usd-rate.url): give the endpoint too", rf.pointer)
		}
		return nil, nil
	}
	if rf.ttl <= 0 {
		return nil, fmt.Errorf("--usd-rate-ttl %v: want a positive duration, e.g. 60s", rf.ttl)
	}
	fetcher, err := a.outbound()
	if err != nil {
		return nil, err
	}
	src, err := usdrate.New(usdrate.Options{URL: rf.url, Pointer: rf.pointer, TTL: rf.ttl, Fetcher: fetcher})
	if err != nil {
		return nil, fmt.Errorf("--usd-rate-url / --usd-rate-pointer (payments.usd-rate): %w", err)
	}
	return src, nil
}

// toleranceOf is --usd-rate-tolerance (percent) as cep8.PayOptions takes
// it: a fraction, negative for none.
func toleranceOf(rf rateFlags) (float64, error) {
	switch p := rf.tolerance; {
	case p < 0 || p > 100 || math.IsNaN(p):
		return 0, fmt.Errorf("--usd-rate-tolerance %g (payments.usd-rate.tolerance): want a percentage from 0 to 100", p)
	case p == 0:
		return -1, nil
	default:
		return p / 100, nil
	}
}
