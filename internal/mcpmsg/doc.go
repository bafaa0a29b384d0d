// Package mcpmsg holds what every relay of MCP messages in cvm needs to read
// and rewrite JSON-RPC messages without an MCP session of its own: the
// method names it treats specially, progress tokens (Token) and where a
// message carries one, request ids as map keys, cancellations, error
// answers, and edits of params that keep every other member's bytes.
//
// The ContextVM client and server (package contextvm), the ContextVM gateway
// (package gateway), the shared upstream session (internal/mcpmux) and the
// MCPx participant client and bridge all move messages between peers that
// chose their own ids and tokens; this package is the one place that knows
// how those look on the wire.
//
// Progress tokens are compared by their JSON value: the number 1 and the
// string "1" are different tokens, as MCP says (seed 002: a token is a
// string or an integer, unique among the sender's requests).
//
// Files: methods.go (the methods treated specially), ids.go (request ids,
// answers and cancellations), token.go (Token and where a message carries
// one), params.go (reading and editing params without re-encoding the rest).
package mcpmsg
