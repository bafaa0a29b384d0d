// Package relaytest starts an embedded relay on a free loopback port for
// tests, in the manner of net/http/httptest (relaytest.go), watches what a
// relay delivers to one key (inbox.go), and serves a relay whose answers
// the test scripts (scripted.go).
package relaytest

import (
	"testing"

	"github.com/cvmgo/cvm/relay"
)

// Start serves an in-memory relay on 127.0.0.1 and closes it when the test
// ends. opts may set anything but the address; DBPath empty keeps it in memory.
func Start(tb testing.TB, opts relay.Options) *relay.Server {
	tb.Helper()
	s, err := relay.Start("127.0.0.1:0", opts)
	if err != nil {
		tb.Fatalf("relaytest: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
