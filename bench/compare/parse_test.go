package main

import (
	"maps"
	"testing"
)

// A test binary's output as bench-compare sees it, with a log line and a
// line that only looks like a result.
const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/cvmgo/cvm/contextvm
cpu: Oxide Virtual Turin-like Processor             
BenchmarkRoundTrip/plaintext-2         	    2000	   2000077 ns/op
    bench_test.go:42: some log line
BenchmarkRoundTrip/encrypted-2         	    2000	   3147067 ns/op	  1234 B/op	      17 allocs/op
BenchmarkFanout-2   	    1444	   1990563 ns/op	     50237 deliveries/s
BenchmarkBroken-2 --- FAIL: it did not work
PASS
`

func TestParseBenchOutput(t *testing.T) {
	got := parseBenchOutput([]byte(benchOutput))
	want := map[string]float64{
		"BenchmarkRoundTrip/plaintext ns/op":     2000077,
		"BenchmarkRoundTrip/encrypted ns/op":     3147067,
		"BenchmarkRoundTrip/encrypted B/op":      1234,
		"BenchmarkRoundTrip/encrypted allocs/op": 17,
		"BenchmarkFanout ns/op":                  1990563,
		"BenchmarkFanout deliveries/s":           50237,
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestParseBenchOutputLastWins(t *testing.T) {
	out := "BenchmarkX-4 10 100 ns/op\nBenchmarkX-4 10 200 ns/op\n"
	if got := parseBenchOutput([]byte(out))["BenchmarkX ns/op"]; got != 200 {
		t.Errorf("got %v, want the last result, 200", got)
	}
}

func TestParseBenchLine(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ok     bool
		name   string
		values map[string]float64
	}{
		{"BenchmarkA-8 \t 100\t 12.5 ns/op\n", true, "BenchmarkA", map[string]float64{"ns/op": 12.5}},
		{"BenchmarkA 100 12.5 ns/op", true, "BenchmarkA", map[string]float64{"ns/op": 12.5}}, // GOMAXPROCS=1: no suffix
		{"BenchmarkA/sub-x-8 1 3 ns/op 4 MB/s", true, "BenchmarkA/sub-x", map[string]float64{"ns/op": 3, "MB/s": 4}},
		{"BenchmarkA-8 100 1.5e+06 ns/op", true, "BenchmarkA", map[string]float64{"ns/op": 1.5e6}},
		{"BenchmarkA-8", false, "", nil},                 // a name printed before a run's logs
		{"BenchmarkA-8 100", false, "", nil},             // no figures
		{"BenchmarkA-8 100 12 ns/op 13", false, "", nil}, // a value without a unit
		{"BenchmarkA-8 many 12 ns/op", false, "", nil},   // not an iteration count
		{"BenchmarkA-8 100 fast ns/op", false, "", nil},  // not a value
		{"ok  \tgithub.com/x 1.2s", false, "", nil},
		{"", false, "", nil},
	} {
		name, values, ok := parseBenchLine(tc.line)
		if ok != tc.ok || name != tc.name || !maps.Equal(values, tc.values) {
			t.Errorf("parseBenchLine(%q) = %q, %v, %v; want %q, %v, %v", tc.line, name, values, ok, tc.name, tc.values, tc.ok)
		}
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkFanout-2":            "BenchmarkFanout",
		"BenchmarkFanout-16":           "BenchmarkFanout",
		"BenchmarkFanout":              "BenchmarkFanout",
		"BenchmarkRoundTrip/plain-2":   "BenchmarkRoundTrip/plain",
		"BenchmarkRoundTrip/plain-x":   "BenchmarkRoundTrip/plain-x",
		"BenchmarkTrailingDash-":       "BenchmarkTrailingDash-",
		"BenchmarkSize/n=100-1kB-2":    "BenchmarkSize/n=100-1kB",
		"BenchmarkSize/n=100-1kB-2x-2": "BenchmarkSize/n=100-1kB-2x",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseJSONFigures(t *testing.T) {
	out := "starting\n" +
		`{"participants":100,"deliveries_per_s":101015.5,"cpu_per_delivery_us":2.5,"directed_rtt_p50_ms":0.179,"name":"x","nested":{"a":1}}` + "\n"
	got, err := parseJSONFigures([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"participants": 100, "deliveries_per_s": 101015.5, "cpu_per_delivery_us": 2.5, "directed_rtt_p50_ms": 0.179}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseJSONFiguresErrors(t *testing.T) {
	for _, out := range []string{"", "no json here\n", "{not json\n"} {
		if got, err := parseJSONFigures([]byte(out)); err == nil {
			t.Errorf("parseJSONFigures(%q) = %v, want an error", out, got)
		}
	}
}
