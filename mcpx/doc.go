// Package mcpx is the wire format of MCPx v0 (seed 001): topic-based rooms
// over WebSocket in which every participant is an MCP server and calls the
// others' tools. It holds what every side of a room agrees on and nothing
// that runs: envelopes (Envelope, DecodeEnvelope for frames participants
// send, DecodeDelivered for frames a gateway delivers, canonical encoding
// with AppendJSON), the payloads of presence and system envelopes
// (Participant, Presence, Welcome, ErrorPayload), topic and participant
// names, and the error codes (codes.go): the machine-readable codes of
// error envelopes and refused HTTP requests, and the JSON-RPC codes MCPx
// participants answer with.
//
// The roles are packages of their own, each importing this one:
//
//   - room: the gateway, an http.Handler serving rooms (sessions, topics,
//     sequence numbers, presence, tokens, the broker seam for several
//     nodes, REST, metrics); cvm room serve runs it.
//   - participant: a participant in Go, which joins a topic, stays there
//     across reconnects, serves peers with a go-sdk server and presents each
//     peer to a go-sdk client.
//   - bridge: a stdio MCP server made a participant; cvm room bridge.
//   - history: the durable per-topic log behind the gateway.
//   - roomtest: a gateway on a loopback port for tests.
//
// docs/mcpx.md records every place the v0 draft is ambiguous and what cvm
// does there.
//
// Files: envelope.go (the envelope, its limits, decoding and canonical
// encoding), system.go (the payloads of presence and system envelopes),
// names.go (topic and participant id rules), errors.go (EnvelopeError, why a
// frame was refused), codes.go (the codes).
package mcpx
