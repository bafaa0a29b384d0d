// Package peertest is what the tests of contextvm and of the packages that
// plug into it (contextvm/replica, contextvm/cep8) share: an MCP server
// with a few tools, a served contextvm.Server and a connected client
// closed with the test, a peer that speaks ContextVM by hand, a paying
// fixture on a fake ledger, and waiting on a condition. Files: mcp.go
// (the MCP servers and calls), serve.go (servers and clients of a test),
// rawpeer.go (the hand-driven peer), pay.go (the fixture), await.go.
package peertest
