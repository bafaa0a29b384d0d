package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func testReport() *report {
	figs := []comparison{
		compare(comparison{Suite: "contextvm", Figure: "BenchmarkRoundTrip/plaintext", Unit: "ns/op",
			Base: summarize([]float64{2000000, 2100000, 1900000}), New: summarize([]float64{2050000, 2000000, 2010000})}, 0.10),
		compare(comparison{Suite: "relay", Figure: "BenchmarkFanout", Unit: "deliveries/s", HigherIsBetter: true,
			Base: summarize([]float64{50000}), New: summarize([]float64{40000})}, 0.10),
		compare(comparison{Suite: "mcpx", Figure: "directed_rtt_p50_ms", Unit: "ms",
			New: summarize([]float64{0.179}), Notes: []string{"base: package ./cmd/cvm does not exist"}}, 0.10),
	}
	return newReport("HEAD~1", "0123456789abcdef0123", newTree{head: "fedcba9", dirty: true}, 3, 0.10, figs, []float64{0.05, 0.4, 0.2})
}

func TestReportPrint(t *testing.T) {
	var buf bytes.Buffer
	testReport().print(&buf)
	out := buf.String()
	for _, want := range []string{
		"base: HEAD~1 (0123456789ab)",
		"new:  working tree at fedcba9 with uncommitted changes",
		"> 1 means the new code is worse; tolerance 10%",
		"1900000–2100000",
		"1.005",
		"within 10%",
		"WORSE by 25.0%",
		"0.179",
		"NOT MEASURED [1]",
		"[1] mcpx: base: package ./cmd/cvm does not exist",
		"Other processes used 20% of the CPUs during a run (median; from 5% to 40%).",
		"The machine was busy",
		"NOT OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

func TestReportOK(t *testing.T) {
	r := testReport()
	if r.OK {
		t.Error("OK with a worse and an unmeasured figure")
	}
	r = newReport("HEAD", "x", newTree{}, 1, 0.10, r.Figures[:1], nil)
	if !r.OK {
		t.Error("not OK with one figure within the tolerance")
	}
	if newReport("HEAD", "x", newTree{}, 1, 0.10, nil, nil).OK {
		t.Error("OK with no figures at all")
	}
}

func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(testReport())
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		OK      bool `json:"ok"`
		Figures []struct {
			Verdict string  `json:"verdict"`
			Ratio   float64 `json:"ratio"`
			Base    *struct {
				Median  float64   `json:"median"`
				Samples []float64 `json:"samples"`
			} `json:"base"`
		} `json:"figures"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || len(back.Figures) != 3 || back.Figures[1].Verdict != "worse" || back.Figures[1].Ratio != 1.25 ||
		back.Figures[0].Base.Median != 2000000 || len(back.Figures[0].Base.Samples) != 3 ||
		back.Figures[2].Verdict != "not measured" || back.Figures[2].Base != nil {
		t.Errorf("JSON: %s", b)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		2000077.4: "2000077",
		101015.01: "101015",
		512.34:    "512.3",
		50.237:    "50.24",
		2.50614:   "2.506",
		0.179099:  "0.1791",
		0:         "0",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-base", "HEAD~1", "-n", "7", "-only", "mcpx,relay"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.base != "HEAD~1" || cfg.rounds != 7 || cfg.tolerance != 0.10 {
		t.Errorf("config %+v", cfg)
	}
	// The table's order, not the list's.
	if got := strings.Join(suiteNames(cfg.suites), ","); got != "relay,mcpx" {
		t.Errorf("suites %s, want relay,mcpx", got)
	}
	if cfg, err = parseFlags([]string{"-base", "main"}, io.Discard); err != nil || len(cfg.suites) != 3 || cfg.rounds != 5 {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	for _, args := range [][]string{
		{},
		{"-n", "5"},
		{"-base", "HEAD", "-n", "0"},
		{"-base", "HEAD", "-only", "contextvm,nope"},
		{"-base", "HEAD", "-tolerance", "1.5"},
		{"-base", "HEAD", "extra"},
		{"-base", "HEAD", "-bogus"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
}

func TestRunUsageError(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(nil, io.Discard, &stderr); code != 2 {
		t.Errorf("exit status %d without -base, want 2", code)
	}
	if !strings.Contains(stderr.String(), "-base is required") {
		t.Errorf("stderr %q does not say -base is required", stderr.String())
	}
}

func TestReportPrintNotesOnce(t *testing.T) {
	note := "base, 5 of 5 runs: exit status 1"
	var figs []comparison
	for _, f := range []string{"cpu_per_delivery_us", "deliveries_per_s"} {
		figs = append(figs, compare(comparison{Suite: "mcpx", Figure: f, New: summarize([]float64{1}), Notes: []string{note}}, 0.10))
	}
	var buf bytes.Buffer
	newReport("HEAD", "x", newTree{}, 5, 0.10, figs, []float64{0.01}).print(&buf)
	out := buf.String()
	if strings.Contains(out, "The machine was busy") {
		t.Errorf("a warning about a busy machine at 1%% other load:\n%s", out)
	}
	if strings.Count(out, note) != 1 || strings.Count(out, "NOT MEASURED [1]") != 2 {
		t.Errorf("the shared note is not printed once and referred to twice:\n%s", out)
	}
}
