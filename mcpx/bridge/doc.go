// Package bridge makes a stdio MCP server a participant of an MCPx topic
// (cvm room bridge): one session with the server serves every peer, through
// the shared upstream multiplexer (internal/mcpmux) that the ContextVM
// gateway's shared mode uses too.
//
// Files: bridge.go holds it all, being one concept: Options, Start (the
// server, the handshake, the join) and the announcer that tells the topic
// when the server's tools change; doc.go this comment.
package bridge
