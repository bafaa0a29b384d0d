//go:build !cvmtest

package main

import "github.com/cvmgo/cvm/outbound"

// outboundOptions are the outbound fetcher's options: its defaults. The
// test build (tag cvmtest, outboundtrust_cvmtest.go) also trusts loopback
// servers its tests start; this one never does.
func outboundOptions(func(string) string) (outbound.Options, error) { return outbound.Options{}, nil }
