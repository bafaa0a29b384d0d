//go:build cvmtest

package main

import (
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// Test-only trust of the outbound fetcher, compiled only into the binary
// tests build (internal/cvmtest and the benchmarks, tag cvmtest), never
// into a release: the exact loopback addresses in $CVM_TEST_OUTBOUND_ALLOW
// (ip:port, comma-separated) and the certificates in the PEM file
// $CVM_TEST_OUTBOUND_CA (outboundtest.FromEnv), as outboundtest gives a
// test in the process.
func outboundOptions(getenv func(string) string) (outbound.Options, error) {
	return outboundtest.FromEnv(outbound.Options{}, getenv)
}
