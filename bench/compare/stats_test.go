package main

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 1, 1, 1, 1000}, 1}, // one slow run does not move it
	} {
		in := slices.Clone(tc.in)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("median reordered its argument: %v", in)
		}
	}
}

func TestSummarize(t *testing.T) {
	if s := summarize(nil); s != nil {
		t.Errorf("summarize(nil) = %+v, want nil", s)
	}
	s := summarize([]float64{4, 2, 9, 3, 5})
	if s.Runs != 5 || s.Median != 4 || s.Min != 2 || s.Max != 9 {
		t.Errorf("summarize = %+v", s)
	}
}

// stats builds a sideStats with the given median.
func stats(median float64) *sideStats {
	return summarize([]float64{median})
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name           string
		base, new      *sideStats
		higherIsBetter bool
		ratio          float64
		verdict        verdict
		text           string
	}{
		{"same cost", stats(100), stats(100), false, 1, verdictWithin, "within 10%"},
		{"cost up 5%", stats(100), stats(105), false, 1.05, verdictWithin, "within 10%"},
		{"cost up exactly 10%", stats(100), stats(110), false, 1.1, verdictWithin, "within 10%"},
		{"cost up 25%", stats(100), stats(125), false, 1.25, verdictWorse, "WORSE by 25.0%"},
		{"cost down 5%", stats(100), stats(95), false, 0.95, verdictWithin, "within 10%"},
		{"cost down 20%", stats(100), stats(80), false, 0.8, verdictBetter, "better by 20.0%"},
		{"rate down 20%", stats(100), stats(80), true, 1.25, verdictWorse, "WORSE by 25.0%"},
		{"rate up 25%", stats(100), stats(125), true, 0.8, verdictBetter, "better by 20.0%"},
		{"rate up 5%", stats(100), stats(105), true, 100.0 / 105, verdictWithin, "within 10%"},
		{"no base", nil, stats(100), false, 0, verdictUnmeasured, "NOT MEASURED"},
		{"no new", stats(100), nil, true, 0, verdictUnmeasured, "NOT MEASURED"},
		{"zero base", stats(0), stats(1), false, 0, verdictUnmeasured, "NOT MEASURED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compare(comparison{Base: tc.base, New: tc.new, HigherIsBetter: tc.higherIsBetter}, 0.10)
			if math.Abs(c.Ratio-tc.ratio) > 1e-9 || c.Verdict != tc.verdict {
				t.Errorf("ratio %v, verdict %q; want %v, %q", c.Ratio, c.Verdict, tc.ratio, tc.verdict)
			}
			if got := c.verdictText(0.10); got != tc.text {
				t.Errorf("verdict text %q, want %q", got, tc.text)
			}
			if wantOK := tc.verdict == verdictWithin || tc.verdict == verdictBetter; c.ok() != wantOK {
				t.Errorf("ok() = %v, want %v", c.ok(), wantOK)
			}
		})
	}
}

func TestCompareTolerance(t *testing.T) {
	c := compare(comparison{Base: stats(100), New: stats(104)}, 0.03)
	if c.Verdict != verdictWorse || c.verdictText(0.03) != "WORSE by 4.0%" {
		t.Errorf("with 3%%: %q %q", c.Verdict, c.verdictText(0.03))
	}
	c = compare(comparison{Base: stats(100), New: stats(100)}, 0.025)
	if got := c.verdictText(0.025); got != "within 2.5%" {
		t.Errorf("verdict text %q, want within 2.5%%", got)
	}
}

func TestRoundOrder(t *testing.T) {
	var got []string
	for round := range 4 {
		for _, s := range roundOrder(round) {
			got = append(got, s.String())
		}
	}
	want := "base new new base base new new base"
	if strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(got, " "), want)
	}
}

func TestCompareSuite(t *testing.T) {
	figs := []figure{
		benchFigure("BenchmarkFanout", "ns/op", false),
		benchFigure("BenchmarkFanout", "deliveries/s", true),
	}
	res := [2]samples{newSamples(), newSamples()}
	for _, v := range []float64{100, 102, 98, 101, 99} {
		res[sideBase].record(figs, outcome{values: map[string]float64{"BenchmarkFanout ns/op": v, "BenchmarkFanout deliveries/s": 1e6 / v}})
	}
	// The new side: one failed run, and a custom metric it does not report.
	res[sideNew].record(figs, outcome{err: errors.New("exit status 1")})
	for _, v := range []float64{130, 125, 120, 128} {
		res[sideNew].record(figs, outcome{values: map[string]float64{"BenchmarkFanout ns/op": v}})
	}
	got := compareSuite("relay", figs, [2]prepared{}, res, 5, 0.10)
	if len(got) != 2 {
		t.Fatalf("%d comparisons, want 2", len(got))
	}
	ns := got[0]
	if ns.Verdict != verdictWorse || ns.Base.Median != 100 || ns.New.Median != 126.5 || ns.New.Runs != 4 {
		t.Errorf("ns/op: %+v base %+v new %+v", ns, ns.Base, ns.New)
	}
	if want := []string{"new, 1 of 5 runs: exit status 1"}; !slices.Equal(ns.Notes, want) {
		t.Errorf("ns/op notes %q, want %q", ns.Notes, want)
	}
	rate := got[1]
	if rate.Verdict != verdictUnmeasured || rate.New != nil || rate.Base == nil {
		t.Errorf("deliveries/s: %+v", rate)
	}
	want := []string{
		"new, 1 of 5 runs: exit status 1",
		`new, 4 of 5 runs: "BenchmarkFanout deliveries/s" not in the output`,
	}
	if !slices.Equal(rate.Notes, want) {
		t.Errorf("deliveries/s notes %q, want %q", rate.Notes, want)
	}
}

func TestCompareSuiteMissingAtBase(t *testing.T) {
	figs := []figure{benchFigure("BenchmarkFanout", "ns/op", false)}
	res := [2]samples{newSamples(), newSamples()}
	res[sideNew].record(figs, outcome{values: map[string]float64{"BenchmarkFanout ns/op": 1}})
	preps := [2]prepared{sideBase: {missing: "package ./relay does not exist"}}
	got := compareSuite("relay", figs, preps, res, 1, 0.10)
	want := []string{"base: package ./relay does not exist"}
	if got[0].Verdict != verdictUnmeasured || !slices.Equal(got[0].Notes, want) {
		t.Errorf("got %+v, want not measured with notes %q", got[0], want)
	}
}
