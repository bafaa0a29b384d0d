package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the command line.
type config struct {
	base       string
	rounds     int
	suites     []suite
	json       bool
	tolerance  float64
	goCmd      string
	runTimeout time.Duration
}

// run is main with its exit status returned.
func run(args []string, stdout, stderr io.Writer) int {
	logger := log.New(stderr, "bench-compare: ", 0)
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			logger.Print(err)
		}
		return 2
	}
	if cfg.rounds < 5 {
		logger.Printf("warning: %d runs per side; medians of fewer than 5 are easily moved by one slow run", cfg.rounds)
	}
	// An interrupt cancels the current run and the builds; the base
	// worktree is then removed on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := compareTrees(ctx, cfg, logger)
	if err != nil {
		logger.Print(err)
		return 2
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			logger.Print(err)
			return 2
		}
	} else {
		rep.print(stdout)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.base, "base", "", "the revision to compare with (required), e.g. HEAD~1, main, a tag")
	fs.IntVar(&cfg.rounds, "n", 5, "runs per side")
	only := fs.String("only", "", "comma-separated suites to run (default all): "+strings.Join(suiteNames(allSuites()), ","))
	fs.BoolVar(&cfg.json, "json", false, "print the report as JSON")
	fs.Float64Var(&cfg.tolerance, "tolerance", 0.10, "how much worse a median may be, as a fraction")
	fs.StringVar(&cfg.goCmd, "go", "go", "the go command that builds both sides")
	fs.DurationVar(&cfg.runTimeout, "run-timeout", 10*time.Minute, "limit of one run of one suite")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: go run ./bench/compare -base REV [-n 5] [-only contextvm,relay,mcpx] [-json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.base == "":
		return config{}, errors.New("-base is required: the revision to compare with, e.g. -base HEAD~1")
	case cfg.rounds < 1:
		return config{}, fmt.Errorf("-n %d: at least one run per side", cfg.rounds)
	case cfg.tolerance <= 0 || cfg.tolerance >= 1:
		return config{}, fmt.Errorf("-tolerance %g: a fraction between 0 and 1", cfg.tolerance)
	case cfg.runTimeout <= 0:
		return config{}, fmt.Errorf("-run-timeout %s: must be positive", cfg.runTimeout)
	}
	var err error
	cfg.suites, err = selectSuites(allSuites(), *only)
	return cfg, err
}

// selectSuites keeps the suites an -only list names, in the table's order;
// an empty list keeps them all.
func selectSuites(all []suite, only string) ([]suite, error) {
	if only == "" {
		return all, nil
	}
	names := suiteNames(all)
	want := strings.Split(only, ",")
	for _, w := range want {
		if !slices.Contains(names, w) {
			return nil, fmt.Errorf("-only: unknown suite %q (known: %s)", w, strings.Join(names, ", "))
		}
	}
	var sel []suite
	for _, s := range all {
		if slices.Contains(want, s.name()) {
			sel = append(sel, s)
		}
	}
	return sel, nil
}

func suiteNames(suites []suite) []string {
	names := make([]string, len(suites))
	for i, s := range suites {
		names[i] = s.name()
	}
	return names
}

// compareTrees is the whole session: check the base out, build both
// sides, run the rounds, compare. The worktree and the binaries are removed
// however it ends.
func compareTrees(ctx context.Context, cfg config, logger *log.Logger) (*report, error) {
	nt, err := findNewTree(ctx, cfg.goCmd)
	if err != nil {
		return nil, fmt.Errorf("locating the working tree: %w", err)
	}
	commit, err := resolveCommit(ctx, nt.gitRoot, cfg.base)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "bench-compare-")
	if err != nil {
		return nil, fmt.Errorf("making a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	// The load generator runs in a tree's root and is given the cvm binary's
	// path: it must not depend on the current directory.
	if tmp, err = filepath.Abs(tmp); err != nil {
		return nil, err
	}
	baseDir := filepath.Join(tmp, "base")
	logger.Printf("checking out %s (%s) in %s", cfg.base, shortHash(commit), baseDir)
	remove, err := addWorktree(ctx, logger, nt.gitRoot, commit, baseDir)
	if err != nil {
		return nil, err
	}
	defer remove()

	trees, err := makeTrees(nt, baseDir, tmp)
	if err != nil {
		return nil, err
	}
	b := builder{goCmd: cfg.goCmd, logger: logger}
	preps := make([][2]prepared, len(cfg.suites))
	for i, s := range cfg.suites {
		bp, np, err := s.prepare(ctx, b, trees[sideBase], trees[sideNew])
		if err != nil {
			return nil, fmt.Errorf("suite %s: %w", s.name(), err)
		}
		preps[i] = [2]prepared{sideBase: bp, sideNew: np}
	}

	runTmp := filepath.Join(tmp, "tmp")
	if err := os.Mkdir(runTmp, 0o700); err != nil {
		return nil, fmt.Errorf("making the runs' temporary directory: %w", err)
	}
	r := runner{rounds: cfg.rounds, runTimeout: cfg.runTimeout, tmpDir: runTmp, logger: logger}
	results, loads, err := r.measureAll(ctx, cfg.suites, preps)
	if err != nil {
		return nil, err
	}
	var figs []comparison
	for i, s := range cfg.suites {
		figs = append(figs, compareSuite(s.name(), s.figures(), preps[i], results[i], cfg.rounds, cfg.tolerance)...)
	}
	return newReport(cfg.base, commit, nt, cfg.rounds, cfg.tolerance, figs, loads), nil
}

// makeTrees lays out both sides: the base worktree has the module at the
// same path below its top as the working tree does.
func makeTrees(nt newTree, baseDir, tmp string) ([2]tree, error) {
	rel, err := filepath.Rel(nt.gitRoot, nt.moduleRoot)
	if err != nil {
		return [2]tree{}, fmt.Errorf("placing the module in the base worktree: %w", err)
	}
	trees := [2]tree{
		sideBase: {side: sideBase, root: filepath.Join(baseDir, rel), binDir: filepath.Join(tmp, "bin", "base")},
		sideNew:  {side: sideNew, root: nt.moduleRoot, binDir: filepath.Join(tmp, "bin", "new")},
	}
	for _, t := range trees {
		if err := os.MkdirAll(t.binDir, 0o755); err != nil {
			return [2]tree{}, fmt.Errorf("making %s: %w", t.binDir, err)
		}
	}
	return trees, nil
}
