package main

import (
	"context"
	"fmt"
	"log"
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

// samples collects one suite's results on one side over the rounds.
type samples struct {
	values   map[string][]float64 // figure key → one value per run that reported it
	problems map[string][]string  // figure key → why a run did not report it
}

func newSamples() samples {
	return samples{values: make(map[string][]float64), problems: make(map[string][]string)}
}

// record adds one run's figures, or its failure to every figure.
func (s samples) record(figs []figure, vals map[string]float64, runErr error) {
	for _, f := range figs {
		switch v, ok := vals[f.key]; {
		case runErr != nil:
			s.problems[f.key] = append(s.problems[f.key], runErr.Error())
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
// run is recorded and the rounds go on.
func (r runner) measureAll(ctx context.Context, suites []suite, preps [][2]prepared) ([][2]samples, error) {
	results := make([][2]samples, len(suites))
	for i := range results {
		results[i] = [2]samples{newSamples(), newSamples()}
	}
	for round := range r.rounds {
		for i, s := range suites {
			for _, sd := range roundOrder(round) {
				if preps[i][sd].missing != "" {
					continue
				}
				vals, err := r.measureOnce(ctx, round, s, sd, preps[i][sd])
				if ctx.Err() != nil {
					return nil, fmt.Errorf("interrupted: %w", ctx.Err())
				}
				results[i][sd].record(s.figures(), vals, err)
			}
		}
	}
	return results, nil
}

// measureOnce runs one side of one suite and parses its figures.
func (r runner) measureOnce(ctx context.Context, round int, s suite, sd side, p prepared) (map[string]float64, error) {
	r.logger.Printf("round %d/%d: %s, %s", round+1, r.rounds, s.name(), sd)
	ctx, cancel := context.WithTimeout(ctx, r.runTimeout)
	defer cancel()
	start := time.Now()
	out, err := runCommandEnv(ctx, p.dir, []string{"TMPDIR=" + r.tmpDir}, p.argv...)
	if err == nil {
		var vals map[string]float64
		if vals, err = s.parse(out); err == nil {
			r.logger.Printf("round %d/%d: %s, %s: done in %s", round+1, r.rounds, s.name(), sd, time.Since(start).Round(100*time.Millisecond))
			return vals, nil
		}
	}
	r.logger.Printf("round %d/%d: %s, %s: failed: %v", round+1, r.rounds, s.name(), sd, err)
	return nil, err
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
