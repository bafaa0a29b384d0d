// Package bridge makes a stdio MCP server a participant of an MCPx topic
// (cvm room bridge): one session with the server serves every peer, through
// the shared upstream multiplexer (internal/mcpmux) that the ContextVM
// gateway's shared mode uses too.
package bridge
