// Package contextvm carries the Model Context Protocol over Nostr
// (ContextVM): every JSON-RPC message travels as a kind 25910 event,
// optionally gift-wrapped with NIP-44 (kinds 1059 and 21059), through relays.
//
// The official MCP Go SDK does MCP; this package is the seam underneath it.
// A ClientTransport is an mcp.Transport, so any go-sdk mcp.Client reaches a
// server by its public key. A Server listens under one identity for many
// clients and hands out one ServerConn (an mcp.Connection) per client
// session, which Serve connects to a go-sdk mcp.Server:
//
//	mcp client ─ ClientTransport ─ sign ─ [wrap] ─▶ relays ─▶ Server ─ ServerConn per client ─ mcp server
//	           ◀── correlate by e tag and peer key ─ [unwrap] ─ verify ◀┘
//
// The wire format follows the reference TypeScript SDK (@contextvm/sdk
// 0.11.14) exactly: requests carry ["p", server]; responses and correlated
// notifications ["p", client] and ["e", request event id]; JSON-RPC ids
// travel unchanged; discovery tags go on the first message of each session.
// Where the reference is wrong, cvm is compatible on the wire and correct
// inside: progress, cancellation and resource updates are routed per client
// session, capabilities learned from a peer are replaced rather than OR-ed,
// a refused plaintext or encrypted request gets an error instead of silence,
// and every wrapped event's inner signature, kind and recipient are checked.
//
// Files: codec.go (message ⇄ event), wrap.go (CEP-4/19 gift wraps),
// peer.go (discovery tags, CEP-35), client.go (the client transport),
// server.go and session.go (the server and its per-client sessions),
// endpoint.go (what both share).
package contextvm
