package main

import (
	"context"
	"fmt"
	"log"
	"runtime"
	"time"
)

// roundOrder is the order of the two sides in a round: base first in even
// rounds, new first in odd ones (AB BA AB …). A machine that warms up or
// slows down during the session then weighs on both sides alike, and
// neither side always runs in the other's wake.
func roundOrder(round int) [2]side {
	if round%2 == 0 {
		return [2]side{sideBase, sideNew}
	}
	return [2]side{sideNew, sideBase}
}

// outcome is what one run yields.
type outcome struct {
	values map[string]float64
	err    error
	// otherLoad is the share of the machine's CPUs other processes used
	// during the run (see otherLoad); -1 where it cannot be measured.
	otherLoad float64
}

// samples collects one suite's results on one side over the rounds.
type samples struct {
	values   map[string][]float64 // figure key → one value per run that reported it
	problems map[string][]string  // figure key → why a run did not report it
}

func newSamples() samples {
	return samples{values: make(map[string][]float64), problems: make(map[string][]string)}
}

// record adds one run's figures, or its failure to every figure.
func (s samples) record(figs []figure, o outcome) {
	for _, f := range figs {
		switch v, ok := o.values[f.key]; {
		case o.err != nil:
			s.problems[f.key] = append(s.problems[f.key], o.err.Error())
		case !ok:
			s.problems[f.key] = append(s.problems[f.key], fmt.Sprintf("%q not in the output", f.key))
		default:
			s.values[f.key] = append(s.values[f.key], v)
		}
	}
}

// runner runs the rounds.
type runner struct {
	rounds     int
	runTimeout time.Duration
	// tmpDir is the runs' TMPDIR. A run killed on timeout or interrupt
	// cannot remove its temporary files (mcpxload's gateway data, a test's
	// TempDir); they go where bench-compare removes them.
	tmpDir string
	logger *log.Logger
}

// measureAll runs every prepared side of every suite once per round, one
// process at a time: two benchmarks at once on a 2-core machine would
// measure each other. It returns early only if ctx is cancelled; a failed
// run is recorded and the rounds go on. It also returns the other load
// during each run, where known.
func (r runner) measureAll(ctx context.Context, suites []suite, preps [][2]prepared) ([][2]samples, []float64, error) {
	results := make([][2]samples, len(suites))
	for i := range results {
		results[i] = [2]samples{newSamples(), newSamples()}
	}
	var loads []float64
	for round := range r.rounds {
		for i, s := range suites {
			for _, sd := range roundOrder(round) {
				if preps[i][sd].missing != "" {
					continue
				}
				o := r.measureOnce(ctx, round, s, sd, preps[i][sd])
				if ctx.Err() != nil {
					return nil, nil, fmt.Errorf("interrupted: %w", ctx.Err())
				}
				results[i][sd].record(s.figures(), o)
				if o.otherLoad >= 0 {
					loads = append(loads, o.otherLoad)
				}
			}
		}
	}
	return results, loads, nil
}

// measureOnce runs one side of one suite and parses its figures.
func (r runner) measureOnce(ctx context.Context, round int, s suite, sd side, p prepared) outcome {
	what := fmt.Sprintf("round %d/%d: %s, %s", round+1, r.rounds, s.name(), sd)
	r.logger.Print(what)
	ctx, cancel := context.WithTimeout(ctx, r.runTimeout)
	defer cancel()
	busy0, ok0 := machineBusy()
	start := time.Now()
	out, state, err := runCommandEnv(ctx, p.dir, []string{"TMPDIR=" + r.tmpDir}, p.argv...)
	wall := time.Since(start)
	busy1, ok1 := machineBusy()
	o := outcome{err: err, otherLoad: -1}
	if ok0 && ok1 && state != nil {
		o.otherLoad = otherLoad(busy1-busy0, state.UserTime()+state.SystemTime(), wall, runtime.NumCPU())
	}
	if o.err == nil {
		o.values, o.err = s.parse(out)
	}
	if o.err != nil {
		r.logger.Printf("%s: failed: %v", what, o.err)
		return o
	}
	load := ""
	if o.otherLoad >= 0 {
		load = fmt.Sprintf("; other processes used %.0f%% of the CPUs", o.otherLoad*100)
	}
	r.logger.Printf("%s: done in %s%s", what, wall.Round(100*time.Millisecond), load)
	return o
}

// compareSuite turns one suite's samples into one comparison per figure,
// with notes on whatever kept a side from being measured.
func compareSuite(name string, figs []figure, preps [2]prepared, res [2]samples, rounds int, tolerance float64) []comparison {
	var out []comparison
	for _, f := range figs {
		c := comparison{Suite: name, Figure: f.name, Unit: f.unit, HigherIsBetter: f.higherIsBetter}
		for _, sd := range []side{sideBase, sideNew} {
			if why := preps[sd].missing; why != "" {
				c.Notes = append(c.Notes, fmt.Sprintf("%s: %s", sd, why))
				continue
			}
			c.Notes = append(c.Notes, problemNotes(sd, res[sd].problems[f.key], rounds)...)
			stats := summarize(res[sd].values[f.key])
			if sd == sideBase {
				c.Base = stats
			} else {
				c.New = stats
			}
		}
		out = append(out, compare(c, tolerance))
	}
	return out
}

// problemNotes condenses the reasons runs failed into one note per distinct
// reason, with how many of the runs it hit: the same failure five times
// is one note.
func problemNotes(sd side, problems []string, rounds int) []string {
	var order []string
	count := make(map[string]int)
	for _, p := range problems {
		if count[p] == 0 {
			order = append(order, p)
		}
		count[p]++
	}
	notes := make([]string, 0, len(order))
	for _, p := range order {
		notes = append(notes, fmt.Sprintf("%s, %d of %d runs: %s", sd, count[p], rounds, p))
	}
	return notes
}
