//go:build !linux

package main

import "syscall"

// rusageWho is, where a thread's own CPU time cannot be read, the whole
// process: the garbage collector's share counts in.
const rusageWho = syscall.RUSAGE_SELF
