package main

import (
	"fmt"
	"math"
	"slices"
)

// sideStats summarizes one side's samples of one figure.
type sideStats struct {
	Runs    int       `json:"runs"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"`
}

// summarize returns the median and spread of samples, or nil if there are
// none. The median rather than the mean, because on a shared machine a
// run is sometimes slowed by something else and one such run should not
// move the answer.
func summarize(samples []float64) *sideStats {
	if len(samples) == 0 {
		return nil
	}
	return &sideStats{
		Runs:    len(samples),
		Median:  median(samples),
		Min:     slices.Min(samples),
		Max:     slices.Max(samples),
		Samples: slices.Clone(samples),
	}
}

// median of a non-empty slice; the mean of the middle two for an even count.
func median(samples []float64) float64 {
	s := slices.Sorted(slices.Values(samples))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// verdict is the machine-readable outcome of one figure.
type verdict string

const (
	verdictWithin     verdict = "within"
	verdictWorse      verdict = "worse"
	verdictBetter     verdict = "better"
	verdictUnmeasured verdict = "not measured"
)

// comparison is one figure's outcome: both sides' statistics and the
// ratio of their medians.
type comparison struct {
	Suite          string     `json:"suite"`
	Figure         string     `json:"figure"`
	Unit           string     `json:"unit"`
	HigherIsBetter bool       `json:"higher_is_better"`
	Base           *sideStats `json:"base,omitempty"`
	New            *sideStats `json:"new,omitempty"`
	// Ratio is oriented so that > 1 means the new code is worse:
	// new/base for a cost (ns/op, CPU per delivery, latency), base/new for
	// a rate (deliveries/s).
	Ratio float64 `json:"ratio,omitempty"`
	// Percent is how much worse (> 0) or better (< 0) the new code is:
	// (Ratio-1)*100.
	Percent float64  `json:"percent"`
	Verdict verdict  `json:"verdict"`
	Notes   []string `json:"notes,omitempty"`
}

// ok reports whether this figure lets the change pass: within the
// tolerance or better. A figure that could not be measured does not pass,
// since "no slower" is then unanswered.
func (c *comparison) ok() bool {
	return c.Verdict == verdictWithin || c.Verdict == verdictBetter
}

// compare forms the oriented ratio of the medians and the verdict with the
// given tolerance (0.10 for 10%). The tolerance is symmetric: a ratio below
// 1-tolerance is "better", so that noise alone is reported as "within".
func compare(c comparison, tolerance float64) comparison {
	switch {
	case c.Base == nil || c.New == nil:
		c.Verdict = verdictUnmeasured
		return c
	case c.Base.Median <= 0 || c.New.Median <= 0:
		// A zero median has no ratio; it means the figure was not really
		// measured (e.g. no deliveries), not that it was free.
		c.Verdict = verdictUnmeasured
		c.Notes = append(c.Notes, "a median is zero or negative: no ratio")
		return c
	}
	c.Ratio = c.New.Median / c.Base.Median
	if c.HigherIsBetter {
		c.Ratio = c.Base.Median / c.New.Median
	}
	c.Percent = (c.Ratio - 1) * 100
	switch {
	case c.Ratio > 1+tolerance:
		c.Verdict = verdictWorse
	case c.Ratio < 1-tolerance:
		c.Verdict = verdictBetter
	default:
		c.Verdict = verdictWithin
	}
	return c
}

// verdictText is the verdict as the table prints it.
func (c *comparison) verdictText(tolerance float64) string {
	switch c.Verdict {
	case verdictWorse:
		return fmt.Sprintf("WORSE by %.1f%%", c.Percent)
	case verdictBetter:
		return fmt.Sprintf("better by %.1f%%", -c.Percent)
	case verdictWithin:
		return fmt.Sprintf("within %g%%", math.Round(tolerance*1000)/10)
	default:
		return "NOT MEASURED"
	}
}
