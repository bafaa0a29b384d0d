// Command compare answers "is the new code no slower than the old?".
//
// It checks the base revision out in a temporary git worktree, builds the
// benchmarks of both trees (the base and the working tree it runs in,
// uncommitted changes included), then runs them in rounds, one process at
// a time, alternating which side goes first (AB BA AB …), and compares the
// medians of each figure with a tolerance of 10%:
//
//   - contextvm: BenchmarkRoundTrip (plaintext and encrypted), ns/op;
//   - relay: BenchmarkFanout, ns/op and deliveries/s;
//   - mcpx: bench/mcpxload against each side's "cvm room serve": CPU per
//     delivery, deliveries/s and the directed round trip's p50.
//
// The exit status is 0 if every figure is within the tolerance or better,
// 1 if one is worse or could not be measured on a side, 2 on a usage or
// build error.
//
//	go run ./bench/compare -base HEAD~1 [-n 5] [-only contextvm,relay,mcpx] [-json]
//	make bench-compare BASE=HEAD~1 [N=5]
//
// Files: main.go (flags, and the run from trees to report), git.go (the
// working tree and the base's temporary worktree), suites.go (the suites and
// their figures, and building each side), measure.go (the rounds,
// alternating sides), exec.go (running a command and reporting its output's
// tail on failure) and procgroup_*.go (a process group per run on unix, so
// that cancelling kills mcpxload's children too; nothing elsewhere),
// parse.go (reading figures from benchmark and JSON output), stats.go
// (medians, spreads and verdicts), machine.go (how busy the machine was with
// others' work meanwhile), report.go (the report, as text or JSON). Each
// run's figures go from parse.go through stats.go into the report;
// machine.go only annotates it, since a busy machine is a reason to doubt a
// figure, not to change it.
package main
