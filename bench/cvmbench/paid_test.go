package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

// The paid calls, briefly, as the command runs them (cvm and the demo
// server built, every peer started): every path gives its free and paid
// figures (each paid call paid once, which measurePaid checks on the
// receiving wallet), cvm's paid p50s are set against the reference pair's,
// the channel and direct (Cashu) paths' against their free calls, and the
// report prints them.
func TestRun_PaidCalls(t *testing.T) {
	root := testRoot(t)
	ctx, cancel := testwait.Context(t, 5*time.Minute)
	defer cancel()
	const calls = 2
	defer func(n int) { *paidCalls = n }(*paidCalls)
	*paidCalls = calls
	rep, err := run(ctx, root, map[string]bool{partPaid: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PaidError != "" || rep.Results != nil || rep.SessionsCounted != 0 || !rep.measured() {
		t.Fatalf("report of the paid calls alone: %+v", rep)
	}
	var paths []string
	for _, r := range rep.Paid {
		paths = append(paths, r.Path)
		if r.Error != "" || r.Calls != calls || r.FreeP50ms <= 0 || r.FreeP90ms < r.FreeP50ms || r.PaidP50ms <= 0 || r.PaidP90ms < r.PaidP50ms ||
			r.PaidOverFree != r.PaidP50ms/r.FreeP50ms {
			t.Errorf("%s: %+v", r.Path, r)
		}
	}
	if strings.Join(paths, ", ") != strings.Join([]string{pathCVM, pathChannel, pathReference, pathRefToGW, pathZap, pathDirect}, ", ") {
		t.Errorf("paths measured: %q", paths)
	}
	if len(rep.Ratios) != 4 || rep.Ratios[ratioCVMPaid] <= 0 || rep.Ratios[ratioRefGWPaid] <= 0 || rep.Ratios[ratioChannel] != rep.Paid[1].PaidOverFree ||
		rep.Ratios[ratioDirect] != rep.Paid[5].PaidOverFree {
		t.Errorf("ratios %v; want %s, %s, %s and %s", rep.Ratios, ratioCVMPaid, ratioRefGWPaid, ratioChannel, ratioDirect)
	}
	var out bytes.Buffer
	printReport(&out, rep)
	for _, want := range [][2]string{
		{pathCVM, fmt.Sprintf("%.1f ms", rep.Paid[0].PaidP50ms)},
		{pathChannel, fmt.Sprintf("%.1f ms", rep.Paid[1].PaidP50ms)},
		{pathReference, fmt.Sprintf("%.1f ms", rep.Paid[2].PaidP50ms)},
		{"paid p50 cvm over reference", fmt.Sprintf("%.3f", rep.Ratios[ratioCVMPaid])},
		{"channel paid p50 over free", fmt.Sprintf("%.3f", rep.Ratios[ratioChannel])},
		{"direct paid p50 over free", fmt.Sprintf("%.3f", rep.Ratios[ratioDirect])},
	} {
		if !hasLine(out.String(), want[0], want[1]) {
			t.Errorf("report lacks a line %q … %q:\n%s", want[0], want[1], out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// A path's figures stand only when its server was paid exactly once per
// paid call.
func TestCollected(t *testing.T) {
	if err := collected(5000, 5000+3*price*1000, 3); err != nil {
		t.Errorf("three calls paid once each: %v", err)
	}
	for _, after := range []int64{5000, 5000 + 2*price*1000, 5000 + 4*price*1000} {
		if err := collected(5000, after, 3); err == nil || !strings.Contains(err.Error(), "for 3 paid calls") {
			t.Errorf("%d msat received for 3 calls: %v; want an error", after-5000, err)
		}
	}
}

// A figure not measured is printed as such, with its reason, never as a
// number, and no ratio is made of it; the run then fails.
func TestPrintReport_NotMeasured(t *testing.T) {
	rep := report{
		Paid: []paidResult{
			{Path: pathCVM, Calls: 3, FreeP50ms: 10, FreeP90ms: 11, PaidP50ms: 50, PaidP90ms: 60, PaidOverFree: 5},
			{Path: pathReference, Calls: 3, Error: "ts-server.mjs: not ready"},
		},
		SessionsError: "not measured: the server opened 152 of the 10000 sessions asked for",
	}
	rep.Ratios = paidRatios(rep.Paid)
	if len(rep.Ratios) != 0 {
		t.Errorf("ratios %v made of a path not measured", rep.Ratios)
	}
	var out bytes.Buffer
	printReport(&out, rep)
	for _, want := range [][2]string{
		{pathCVM, "50.0 ms"},
		{pathReference, "not measured: ts-server.mjs: not ready"},
		{"idle sessions", "not measured: the server opened 152 of the 10000"},
	} {
		if !hasLine(out.String(), want[0], want[1]) {
			t.Errorf("report lacks a line %q … %q:\n%s", want[0], want[1], out.String())
		}
	}
	if strings.Contains(out.String(), "KiB") {
		t.Errorf("report gives a size per session not measured:\n%s", out.String())
	}
	if rep.measured() {
		t.Error("a report with figures not measured counts as measured")
	}
}

// hasLine reports whether a line of s starts with prefix and holds want.
func hasLine(s, prefix, want string) bool {
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, want) {
			return true
		}
	}
	return false
}
