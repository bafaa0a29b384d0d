package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// A benchmark's wall-clock figures are only as good as the machine is
// quiet: on a shared machine another user's test suite can slow one run
// several times over. bench-compare cannot prevent that, but it measures
// it, so the report can say whether its medians are to be trusted: the CPU
// time the whole machine was busy during a run, less the run's own.

// machineBusy is the CPU time the machine has spent busy since boot, all
// processes together, from the first line of /proc/stat. ok is false where
// that is not available (not Linux).
func machineBusy() (busy time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq, steal, in ticks. All but idle and iowait are
// busy; steal is time the hypervisor gave to another virtual machine, which
// slows a run as much as a local process does. (guest time is already
// counted in user.)
func parseProcStat(stat string) (time.Duration, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, false
	}
	var ticks uint64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// clockTicks is USER_HZ, the unit of /proc/stat; 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// otherLoad is the share of the machine's CPUs that processes other than
// the run kept busy while it ran: 0 on a quiet machine, 1 if something
// else used every CPU all along. The run's own CPU time includes its
// children's (mcpxload's gateway), which it waits for.
func otherLoad(machineBusy, ownCPU, wall time.Duration, cpus int) float64 {
	if wall <= 0 || cpus <= 0 {
		return 0
	}
	other := float64(machineBusy-ownCPU) / (float64(wall) * float64(cpus))
	// Tick granularity can make a quiet machine's share slightly negative.
	return min(max(other, 0), 1)
}
