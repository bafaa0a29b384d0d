// Package outboundtest builds outbound Fetchers for tests, whose servers
// listen on loopback: Allowing for httptest servers in the test's
// process (outboundtest.go), FromEnv for a cvm binary a test runs, told of
// its loopback servers by two variables (env.go).
package outboundtest

import (
	"net/http/httptest"
	"net/netip"

	"github.com/cvmgo/cvm/outbound"
)

// Allowing returns a Fetcher that fetches from exactly srvs besides the
// public Internet: each one's listening address (no other port of the same
// host) and, for a TLS server, its certificate.
func Allowing(srvs ...*httptest.Server) *outbound.Fetcher {
	var opts outbound.Options
	for _, s := range srvs {
		opts.Allow = append(opts.Allow, netip.MustParseAddrPort(s.Listener.Addr().String()))
		if c := s.Certificate(); c != nil {
			opts.ExtraRoots = append(opts.ExtraRoots, c)
		}
	}
	return outbound.New(opts)
}
