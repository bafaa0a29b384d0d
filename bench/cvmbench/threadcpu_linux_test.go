package main

import "syscall"

// rusageWho is whose CPU time threadCPU reads: the calling thread's.
const rusageWho = syscall.RUSAGE_THREAD
