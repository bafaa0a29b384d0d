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
//   - topic.go: a topic keeps its local connections, replaces a
//     participant's older connection when it reconnects, and sends the
//     welcome and presence (join, leave, heartbeat).
//   - publish.go: a topic hands each envelope to the backend's log and
//     delivers what the log hands back, in its order (Deliver); the
//     sender's echo, its acknowledgement, waits in its place until the
//     log stored the envelope, and the connection's later answers wait
//     behind it.
//   - backend.go: the Backend seam the topics are written over once: a
//     Roster (who is in each topic), a Log (order, seqs, storage,
//     delivery to every node's Follower), a Broker for presence, and the
//     history that reads the log back. local.go is the Backend of one
//     process, over Options.History; package roomnats is one on NATS
//     JetStream that several gateway nodes share (Options.Backend).
//   - broker.go: presence is published once to a Broker; LocalBroker
//     delivers in-process.
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
