package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"
)

// allSuites is the table of what bench-compare measures. Package paths are
// relative to each tree's module root; a refactor that moves a package
// edits this table and nothing else. A path missing from the new tree is an
// error; one missing at the base makes that side "not measured".
//
// The run lengths are chosen so that one run takes 5 to 10 seconds on a
// quiet 2-core machine (contextvm about 9 s, relay 5 s, mcpx 9 s): long
// enough that a burst of other work is averaged over, short enough for 5
// rounds in about 7 minutes. Fixed iteration counts rather than durations,
// so that both sides do the same work.
func allSuites() []suite {
	return []suite{
		&goBench{
			label:     "contextvm",
			pkg:       "./contextvm",
			bench:     "^BenchmarkRoundTrip$",
			benchtime: "2000x",
			figs: []figure{
				benchFigure("BenchmarkRoundTrip/plaintext", "ns/op", false),
				benchFigure("BenchmarkRoundTrip/encrypted", "ns/op", false),
			},
		},
		&goBench{
			label:     "relay",
			pkg:       "./relay",
			bench:     "^BenchmarkFanout$",
			benchtime: "5000x",
			figs: []figure{
				benchFigure("BenchmarkFanout", "ns/op", false),
				benchFigure("BenchmarkFanout", "deliveries/s", true),
			},
		},
		&mcpxLoad{
			label:   "mcpx",
			cvmPkg:  "./cmd/cvm",
			loadPkg: "./bench/mcpxload",
			// A shorter fan-out phase than mcpxload's default (5s), which is
			// meant for one careful run rather than ten.
			args: []string{"-duration", "3s", "-rtts", "3000"},
			figs: []figure{
				{name: "cpu_per_delivery_us", key: "cpu_per_delivery_us", unit: "µs"},
				{name: "deliveries_per_s", key: "deliveries_per_s", unit: "1/s", higherIsBetter: true},
				{name: "directed_rtt_p50_ms", key: "directed_rtt_p50_ms", unit: "ms"},
			},
		},
	}
}

// figure is one number a suite reports.
type figure struct {
	name           string // as the table shows it
	key            string // its key in the suite's parsed output
	unit           string
	higherIsBetter bool // a rate, not a cost
}

// benchFigure is a figure of a Go benchmark result line.
func benchFigure(bench, unit string, higherIsBetter bool) figure {
	return figure{name: bench, key: benchKey(bench, unit), unit: unit, higherIsBetter: higherIsBetter}
}

// side is one of the two trees compared.
type side int

const (
	sideBase side = iota
	sideNew
)

func (s side) String() string {
	if s == sideBase {
		return "base"
	}
	return "new"
}

// tree is one side's checkout and the directory its binaries go to.
type tree struct {
	side   side
	root   string // the module root
	binDir string
}

// unavailable records that this side cannot be measured. At the base that
// is a result: the code being compared against may predate a benchmark. In
// the new tree it means the suite table or the change is wrong.
func (t tree) unavailable(why string) (prepared, error) {
	if t.side == sideNew {
		return prepared{}, fmt.Errorf("new tree: %s", why)
	}
	return prepared{missing: why}, nil
}

// prepared is what measuring one side of a suite takes: the command of one
// run, or why that side cannot be measured.
type prepared struct {
	dir     string
	argv    []string
	missing string
}

// suite is a group of figures that one process measures in one run.
type suite interface {
	name() string
	figures() []figure
	// prepare builds what the runs need on both sides. It builds the new
	// side first, so that a change that does not compile fails before the
	// base is built.
	prepare(ctx context.Context, b builder, base, new tree) (basePrep, newPrep prepared, err error)
	// parse extracts the figures from one run's standard output.
	parse(stdout []byte) (map[string]float64, error)
}

// builder runs the go command.
type builder struct {
	goCmd  string
	logger *log.Logger
}

// run runs "go args..." in t's module root, logging how long it took.
func (b builder) run(ctx context.Context, t tree, what string, args ...string) error {
	b.logger.Printf("building %s (%s)", what, t.side)
	start := time.Now()
	if _, err := runCommand(ctx, t.root, append([]string{b.goCmd}, args...)...); err != nil {
		return fmt.Errorf("building %s (%s): %w", what, t.side, err)
	}
	b.logger.Printf("built %s (%s) in %s", what, t.side, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// packageMissing says why pkg cannot be built in t, or "" if it can be
// tried: its directory exists.
func packageMissing(t tree, pkg string) string {
	if st, err := os.Stat(filepath.Join(t.root, pkg)); err != nil || !st.IsDir() {
		return fmt.Sprintf("package %s does not exist", pkg)
	}
	return ""
}

// goBench measures a benchmark of one package by running its compiled
// test binary, as "go test -bench" would but without rebuilding each time.
type goBench struct {
	label     string
	pkg       string
	bench     string // the -test.bench pattern
	benchtime string
	figs      []figure
}

func (g *goBench) name() string      { return g.label }
func (g *goBench) figures() []figure { return g.figs }

func (g *goBench) prepare(ctx context.Context, b builder, base, new tree) (prepared, prepared, error) {
	np, err := g.prepareSide(ctx, b, new)
	if err != nil {
		return prepared{}, prepared{}, err
	}
	bp, err := g.prepareSide(ctx, b, base)
	return bp, np, err
}

func (g *goBench) prepareSide(ctx context.Context, b builder, t tree) (prepared, error) {
	if why := packageMissing(t, g.pkg); why != "" {
		return t.unavailable(why)
	}
	bin := filepath.Join(t.binDir, g.label+".test")
	if err := b.run(ctx, t, g.pkg+" tests", "test", "-c", "-o", bin, g.pkg); err != nil {
		return prepared{}, err
	}
	// "go test -c" succeeds without writing anything for a package that
	// has no test files.
	if _, err := os.Stat(bin); err != nil {
		return t.unavailable(fmt.Sprintf("package %s has no tests", g.pkg))
	}
	return prepared{
		// The package directory, as "go test" runs its binaries there.
		dir: filepath.Join(t.root, g.pkg),
		argv: []string{bin, "-test.run", "^$", "-test.bench", g.bench,
			"-test.benchtime", g.benchtime, "-test.count", "1"},
	}, nil
}

func (g *goBench) parse(stdout []byte) (map[string]float64, error) {
	figs := parseBenchOutput(stdout)
	if len(figs) == 0 {
		return nil, fmt.Errorf("no result for %s in the output", g.bench)
	}
	return figs, nil
}

// mcpxLoad measures the MCPx gateway with bench/mcpxload. The load
// generator is built once, from the new tree, and drives both sides' cvm:
// only the gateway differs, and a change to the load generator cannot
// pass for a change in the gateway.
type mcpxLoad struct {
	label   string
	cvmPkg  string
	loadPkg string
	args    []string
	figs    []figure
}

func (m *mcpxLoad) name() string      { return m.label }
func (m *mcpxLoad) figures() []figure { return m.figs }

func (m *mcpxLoad) prepare(ctx context.Context, b builder, base, new tree) (prepared, prepared, error) {
	if why := packageMissing(new, m.loadPkg); why != "" {
		_, err := new.unavailable(why)
		return prepared{}, prepared{}, err
	}
	load := filepath.Join(new.binDir, "mcpxload")
	if err := b.run(ctx, new, m.loadPkg, "build", "-o", load, m.loadPkg); err != nil {
		return prepared{}, prepared{}, err
	}
	np, err := m.prepareSide(ctx, b, new, load)
	if err != nil {
		return prepared{}, prepared{}, err
	}
	bp, err := m.prepareSide(ctx, b, base, load)
	return bp, np, err
}

func (m *mcpxLoad) prepareSide(ctx context.Context, b builder, t tree, load string) (prepared, error) {
	if why := packageMissing(t, m.cvmPkg); why != "" {
		return t.unavailable(why)
	}
	bin := filepath.Join(t.binDir, "cvm")
	if err := b.run(ctx, t, m.cvmPkg, "build", "-o", bin, m.cvmPkg); err != nil {
		return prepared{}, err
	}
	argv := append([]string{load, "-cvm", bin, "-json"}, m.args...)
	return prepared{dir: t.root, argv: argv}, nil
}

func (m *mcpxLoad) parse(stdout []byte) (map[string]float64, error) {
	figs, err := parseJSONFigures(stdout)
	if err != nil {
		return nil, fmt.Errorf("%s output: %w", m.loadPkg, err)
	}
	return figs, nil
}
