// Package mcpx is MCPx v0: a gateway for topic-based rooms over WebSocket in
// which every participant is an MCP server and calls the others' tools
// (seed 001, the MCPx v0 draft; docs/mcpx.md records every place the draft
// is ambiguous and what this gateway does there).
//
// The pieces, in the order an envelope meets them:
//
//   - auth.go, keys.go, token.go: bearer tokens are JWTs (EdDSA, or HS256)
//     whose aud names the topics, whose sub is the participant id and whose
//     name and kind are announced in presence. LoadOrCreateKeys keeps the
//     signing keys as files in a data directory, so a token minted by one
//     process is accepted by a gateway running in another. Every refusal
//     happens before the WebSocket upgrade, as 401/403 with a JSON body.
//   - ws.go, session.go: one session per connection. Its read loop decodes
//     and validates every frame (envelope.go) and answers anything it
//     refuses with an error envelope (errors.go, system.go); its writer
//     drains a bounded queue in batches it frames itself (internal/wsconn,
//     shared with the relay); its pinger
//     drops peers that stop answering and publishes presence heartbeats
//     for those that do.
//   - topic.go: a topic orders its envelopes (sequence numbers, history,
//     publish), keeps the roster, replaces a participant's older
//     connection when it reconnects, and sends the welcome and presence.
//   - broker.go: topics publish each encoded envelope once to a Broker;
//     LocalBroker delivers in-process. A broker between processes (NATS)
//     lets several gateway nodes serve one topic.
//   - history (subpackage): the durable per-topic log in bbolt, with group
//     commit, retention and cursors; rest.go serves it with the topics and
//     participants endpoints.
//   - gateway.go, server.go, metrics.go: Options, the http.Handler, Start
//     for a listening server, and Prometheus metrics in a registry per
//     gateway.
//
// A participant's side, in Go:
//
//   - client.go and client_*.go: Client joins a topic and stays there,
//     reconnecting with backoff and resuming from history by seq, so that
//     nothing is lost or seen twice; it correlates requests by envelope,
//     performs one MCP handshake per peer, cancels what times out, presents
//     each peer to a go-sdk client (PeerTransport) and serves peers with a
//     go-sdk server (SDKServer) or any PeerServer.
//   - bridge.go: Bridge makes a stdio MCP server a participant.
//
// Concurrency: a Gateway is safe for concurrent use. Each session has
// three goroutines (read, write, ping), all owned by the HTTP handler that
// accepted it and all finished before that handler returns; Close ends
// them and waits. A Client and a Bridge are safe for concurrent use; their
// Close waits for every goroutine they started.
package mcpx
