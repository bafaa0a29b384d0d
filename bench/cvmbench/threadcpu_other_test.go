//go:build !linux

package main

import (
	"syscall"
	"testing"
	"time"
)

// threadCPU is, where a thread's own CPU time cannot be read, the CPU time
// of the whole process: the garbage collector's share counts in.
func threadCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
