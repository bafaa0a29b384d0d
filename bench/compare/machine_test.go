package main

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	stat := "cpu  178292 10 62825 61742 577 3 5077 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"
	got, ok := parseProcStat(stat)
	// user+nice+system+irq+softirq+steal, without idle and iowait, at 100 ticks a second.
	if want := time.Duration(178292+10+62825+3+5077+40) * 10 * time.Millisecond; !ok || got != want {
		t.Errorf("parseProcStat = %v, %v; want %v", got, ok, want)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, ok := parseProcStat(bad); ok {
			t.Errorf("parseProcStat(%q) ok", bad)
		}
	}
}

func TestOtherLoad(t *testing.T) {
	for _, tc := range []struct {
		busy, own, wall time.Duration
		cpus            int
		want            float64
	}{
		{2 * time.Second, 2 * time.Second, 10 * time.Second, 2, 0},    // only the run
		{12 * time.Second, 2 * time.Second, 10 * time.Second, 2, 0.5}, // another process on one CPU
		{30 * time.Second, 2 * time.Second, 10 * time.Second, 2, 1},   // more than the machine: tick noise
		{1990 * time.Millisecond, 2 * time.Second, time.Second, 2, 0}, // tick granularity
		{time.Second, 0, 0, 2, 0},                                     // no time passed
	} {
		if got := otherLoad(tc.busy, tc.own, tc.wall, tc.cpus); got != tc.want {
			t.Errorf("otherLoad(%v, %v, %v, %d) = %v, want %v", tc.busy, tc.own, tc.wall, tc.cpus, got, tc.want)
		}
	}
}
