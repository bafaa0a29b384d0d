package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

// The paid calls, briefly: every path gives its free and paid figures
// (each paid call paid once, which measurePaid checks on the receiving
// wallet), and cvm's paid p50s are set against the reference pair's.
func TestMeasurePaid_EveryPath(t *testing.T) {
	root := testRoot(t)
	bins := paidBinaries{CVM: build.CVM(t), DemoServer: build.Path(t, "github.com/cvmgo/cvm/examples/demoserver/cmd")}
	ctx, cancel := testwait.Context(t, 4*time.Minute)
	defer cancel()
	const calls = 2
	results, ratios, err := measurePaid(ctx, root, bins, calls)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range results {
		paths = append(paths, r.Path)
		if r.Error != "" || r.Calls != calls || r.FreeP50ms <= 0 || r.FreeP90ms < r.FreeP50ms || r.PaidP50ms <= 0 || r.PaidP90ms < r.PaidP50ms ||
			r.PaidOverFree != r.PaidP50ms/r.FreeP50ms {
			t.Errorf("%s: %+v", r.Path, r)
		}
	}
	if strings.Join(paths, ", ") != strings.Join([]string{pathCVM, pathReference, pathRefToGW}, ", ") {
		t.Errorf("paths measured: %q", paths)
	}
	if len(ratios) != 2 || ratios[ratioCVMPaid] <= 0 || ratios[ratioRefGWPaid] <= 0 {
		t.Errorf("ratios %v; want %s and %s", ratios, ratioCVMPaid, ratioRefGWPaid)
	}
	t.Logf("%+v %v", results, ratios)
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
