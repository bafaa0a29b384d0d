//go:build cvmtest

package main

import (
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"os"
	"strings"

	"github.com/cvmgo/cvm/outbound"
)

// Test-only trust of the outbound fetcher, compiled only into the binary
// tests build (internal/cvmtest, tag cvmtest), never into a release: the
// exact loopback addresses in $CVM_TEST_OUTBOUND_ALLOW (ip:port,
// comma-separated) and the certificates in the PEM file
// $CVM_TEST_OUTBOUND_ROOTS, as outboundtest.Allowing gives a test in the
// process.
const (
	outboundAllowEnv = "CVM_TEST_OUTBOUND_ALLOW"
	outboundRootsEnv = "CVM_TEST_OUTBOUND_ROOTS"
)

func outboundOptions(getenv func(string) string) outbound.Options {
	var opts outbound.Options
	for _, s := range strings.Split(getenv(outboundAllowEnv), ",") {
		if ap, err := netip.ParseAddrPort(strings.TrimSpace(s)); err == nil {
			opts.Allow = append(opts.Allow, ap)
		}
	}
	if path := getenv(outboundRootsEnv); path != "" {
		rest, _ := os.ReadFile(path)
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				opts.ExtraRoots = append(opts.ExtraRoots, c)
			}
		}
	}
	return opts
}
