// Package gatewaytest is what the tests of package room and of its
// backends share: a gateway on a loopback port (Start), participants'
// raw WebSocket connections to it (Client) and the envelopes they read
// (Msg), and Harness, what a test body sees of one gateway or of several
// nodes sharing a backend.
//
// Files: gatewaytest.go (Start, Gateway, Client and Msg: one gateway and
// the raw connections to it), harness.go (Harness, and Nodes: the same over
// several nodes), sockbuf_*.go (a test client's socket: on unix with a small
// receive buffer, so that a slow consumer's backlog piles up in the
// gateway's send queue rather than in the kernel; a plain dialer elsewhere).
package gatewaytest
