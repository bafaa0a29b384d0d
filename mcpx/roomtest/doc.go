// Package roomtest helps tests drive an MCPx room gateway, as
// net/http/httptest helps with an HTTP server.
//
// roomtest.go starts a gateway on a loopback port (Start): with signing
// keys of its own, durable history in the test's temporary directory, and
// no pings and no rate limit unless the options ask for them; everything
// is closed when the test ends. Restart stops and starts it on the same
// address, as a deploy or a crash does.
//
// publisher.go is the crash tests' participant (Publish): it publishes as
// fast as its echoes allow and records each echo, the gateway's word that
// the envelope is stored, so that a test can kill the gateway under it and
// look for every echoed envelope in history afterwards.
//
// Package room's own tests cannot import roomtest (it imports room); they
// have a harness of their own, and those that need roomtest are in package
// room_test.
package roomtest
