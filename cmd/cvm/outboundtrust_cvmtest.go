//go:build cvmtest

package main

import (
	"fmt"
	"os"

	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// Test-only trust of the outbound fetcher, compiled only into the binary
// tests build (internal/cvmtest and the benchmarks, tag cvmtest), never
// into a release: the exact loopback addresses in $CVM_TEST_OUTBOUND_ALLOW
// (ip:port, comma-separated) and the certificates in the PEM file
// $CVM_TEST_OUTBOUND_CA (outboundtest.FromEnv), as outboundtest gives a
// test in the process. A malformed value is said on stderr and trusts
// nothing more.
func outboundOptions(getenv func(string) string) outbound.Options {
	opts, err := outboundtest.FromEnv(outbound.Options{}, getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cvm (test build):", err)
		return outbound.Options{}
	}
	return opts
}
