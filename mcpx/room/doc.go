// Package room is the MCPx v0 gateway: an http.Handler that serves topics
// (rooms) over WebSocket, orders each topic's envelopes, keeps its roster
// and history, and fans every envelope out to the participants it
// concerns. The wire format is package mcpx; cvm room serve runs a Gateway
// on a data directory.
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
//     and validates every frame (mcpx.DecodeEnvelope) and answers anything
//     it refuses with an error envelope (envelopes.go); its writer drains a
//     bounded queue in batches (internal/wsconn, shared with the relay); its pinger drops peers that stop answering
//     and publishes presence heartbeats for those that do.
//   - topic.go: a topic orders its envelopes (sequence numbers, history,
//     publish), keeps the roster, replaces a participant's older
//     connection when it reconnects, and sends the welcome and presence.
//   - broker.go: topics publish each encoded envelope once to a Broker;
//     LocalBroker delivers in-process. A broker between processes (NATS)
//     lets several gateway nodes serve one topic.
//   - rest.go serves the topics, participants and history endpoints;
//     history itself is package mcpx/history.
//   - gateway.go, server.go, metrics.go: Options, the http.Handler, Start
//     for a listening server, and Prometheus metrics in a registry per
//     gateway.
//
// Concurrency: a Gateway is safe for concurrent use. Each session has
// three goroutines (read, write, ping), all owned by the HTTP handler that
// accepted it and all finished before that handler returns; Close ends
// them and waits.
package room
