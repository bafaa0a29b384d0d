package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// report is the outcome of one comparison session; -json prints it as is.
type report struct {
	Base       string       `json:"base"` // the revision as given
	BaseCommit string       `json:"base_commit"`
	NewCommit  string       `json:"new_commit"` // HEAD of the working tree
	NewDirty   bool         `json:"new_uncommitted_changes"`
	Rounds     int          `json:"runs"` // per side
	Tolerance  float64      `json:"tolerance"`
	OK         bool         `json:"ok"` // every figure within the tolerance or better
	Figures    []comparison `json:"figures"`
	// OtherLoad is, per run, the share of the machine's CPUs that other
	// processes kept busy (0 to 1); absent where it cannot be measured.
	OtherLoad *sideStats `json:"other_load,omitempty"`
}

// busyMachine is the median other load above which the report warns that
// its wall-clock figures are not to be trusted: on a 2-core machine, one
// other busy process takes half of it.
const busyMachine = 0.10

// newReport fills in OK from the figures.
func newReport(base, baseCommit string, t newTree, rounds int, tolerance float64, figs []comparison, loads []float64) *report {
	r := &report{
		Base: base, BaseCommit: baseCommit, NewCommit: t.head, NewDirty: t.dirty,
		Rounds: rounds, Tolerance: tolerance, Figures: figs, OK: len(figs) > 0,
		OtherLoad: summarize(loads),
	}
	for i := range figs {
		if !figs[i].ok() {
			r.OK = false
		}
	}
	return r
}

// print writes the table: one row per figure, then the notes.
func (r *report) print(w io.Writer) {
	newDesc := "working tree at " + shortHash(r.NewCommit)
	if r.NewDirty {
		newDesc += " with uncommitted changes"
	}
	fmt.Fprintf(w, "base: %s (%s)\nnew:  %s\n", r.Base, shortHash(r.BaseCommit), newDesc)
	fmt.Fprintf(w, "%d runs per side, alternating; medians compared.\n", r.Rounds)
	fmt.Fprintf(w, "ratio = new/base for costs, base/new for rates (/s): > 1 means the new code is worse; tolerance %s%%.\n\n",
		strconv.FormatFloat(r.Tolerance*100, 'f', -1, 64))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "suite\tfigure\tunit\tbase median\tnew median\tratio\tbase min–max\tnew min–max\tverdict")
	var fn footnotes
	for i := range r.Figures {
		c := &r.Figures[i]
		v := c.verdictText(r.Tolerance)
		for _, n := range c.Notes {
			v += fmt.Sprintf(" [%d]", fn.number(c.Suite+": "+n))
		}
		ratio := "-"
		if c.Ratio > 0 {
			ratio = fmt.Sprintf("%.3f", c.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Suite, c.Figure, c.Unit,
			medianText(c.Base), medianText(c.New), ratio, spreadText(c.Base), spreadText(c.New), v)
	}
	tw.Flush()
	for i, n := range fn.notes {
		fmt.Fprintf(w, "[%d] %s\n", i+1, indentNote(n))
	}
	fmt.Fprintln(w)
	r.printLoad(w)
	if r.OK {
		fmt.Fprintf(w, "OK: no figure is worse by more than the tolerance.\n")
	} else {
		fmt.Fprintf(w, "NOT OK: a figure is worse by more than the tolerance, or could not be compared.\n")
	}
}

// printLoad says how busy other processes kept the machine during the runs,
// and warns when that makes the verdicts doubtful.
func (r *report) printLoad(w io.Writer) {
	l := r.OtherLoad
	if l == nil {
		return
	}
	fmt.Fprintf(w, "Other processes used %.0f%% of the CPUs during a run (median; from %.0f%% to %.0f%%).\n",
		l.Median*100, l.Min*100, l.Max*100)
	if l.Median > busyMachine {
		fmt.Fprintf(w, "The machine was busy: the times above carry its noise. Compare again when it is quieter.\n")
	}
}

func medianText(s *sideStats) string {
	if s == nil {
		return "-"
	}
	return formatValue(s.Median)
}

// spreadText is the range of a side's samples, "min–max".
func spreadText(s *sideStats) string {
	if s == nil {
		return "-"
	}
	return formatValue(s.Min) + "–" + formatValue(s.Max)
}

// formatValue prints about four significant digits, without an exponent:
// ns/op in the millions and latencies in fractions of a millisecond share
// the table.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// indentNote indents the continuation lines of a multi-line note (a
// command's output) under its first line.
func indentNote(n string) string {
	return strings.ReplaceAll(n, "\n", "\n    ")
}

// footnotes numbers the notes under the table. A failed run of a suite
// is noted on each of its figures; the table shows it once.
type footnotes struct {
	notes []string
}

// number returns the number of note, adding it if it is new.
func (f *footnotes) number(note string) int {
	if i := slices.Index(f.notes, note); i >= 0 {
		return i + 1
	}
	f.notes = append(f.notes, note)
	return len(f.notes)
}
