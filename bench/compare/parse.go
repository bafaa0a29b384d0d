package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// benchKey names one figure of a Go benchmark: the benchmark's full name
// (without the -GOMAXPROCS suffix) and a unit, such as
// "BenchmarkRoundTrip/plaintext ns/op" or "BenchmarkFanout deliveries/s".
func benchKey(name, unit string) string { return name + " " + unit }

// parseBenchOutput reads the standard output of a test binary run with
// -test.bench and returns every figure of every benchmark result line, keyed
// by benchKey. Other lines (goos:, PASS, logs) are skipped: a benchmark's
// own output may be interleaved with the results, and a line that merely
// starts with "Benchmark" but does not parse as a result is not a result.
// If a benchmark reports twice (-test.count > 1), the last result wins;
// bench-compare runs each binary with a count of 1 and repeats the process
// instead, so that each sample is an independent process.
func parseBenchOutput(out []byte) map[string]float64 {
	figures := make(map[string]float64)
	for line := range strings.Lines(string(out)) {
		name, values, ok := parseBenchLine(line)
		if !ok {
			continue
		}
		for unit, v := range values {
			figures[benchKey(name, unit)] = v
		}
	}
	return figures
}

// parseBenchLine parses one result line in the standard format:
//
//	BenchmarkFanout-2   	    1444	   1990563 ns/op	     50237 deliveries/s
//
// that is, a name, an iteration count, then pairs of value and unit.
func parseBenchLine(line string) (name string, values map[string]float64, ok bool) {
	fields := strings.Fields(line)
	// A name, an iteration count and at least one value-unit pair.
	if len(fields) < 4 || len(fields)%2 != 0 || !strings.HasPrefix(fields[0], "Benchmark") {
		return "", nil, false
	}
	if _, err := strconv.ParseUint(fields[1], 10, 64); err != nil {
		return "", nil, false
	}
	values = make(map[string]float64, (len(fields)-2)/2)
	for i := 2; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return "", nil, false
		}
		values[fields[i+1]] = v
	}
	return trimProcs(fields[0]), values, true
}

// trimProcs removes the "-N" suffix the testing package appends to a
// benchmark's name when GOMAXPROCS is not 1. Both sides run on the same
// machine so the suffix would match anyway, but without it the figure names
// in the suite table do not depend on the machine. A sub-benchmark whose own
// name ends in "-<digits>" would lose that part too when GOMAXPROCS is 1;
// none of the measured benchmarks is named so.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

// parseJSONFigures reads the output of a program that prints its figures as
// one flat JSON object (bench/mcpxload -json) and returns its numeric
// fields. It takes the last line that starts with "{", so that anything the
// program prints before its result does not matter.
func parseJSONFigures(out []byte) (map[string]float64, error) {
	var obj []byte
	for line := range bytes.Lines(out) {
		if t := bytes.TrimSpace(line); bytes.HasPrefix(t, []byte("{")) {
			obj = t
		}
	}
	if obj == nil {
		return nil, errors.New("no JSON object in the output")
	}
	var raw map[string]any
	if err := json.Unmarshal(obj, &raw); err != nil {
		return nil, fmt.Errorf("decoding the figures: %w", err)
	}
	figures := make(map[string]float64, len(raw))
	for k, v := range raw {
		if f, ok := v.(float64); ok {
			figures[k] = f
		}
	}
	return figures, nil
}
