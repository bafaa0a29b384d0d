// Package relay is cvm's embedded Nostr relay: khatru with an eventstore
// backend (bbolt on disk, or memory), plus the policies a relay open to the
// network needs and khatru leaves to its users.
//
// A Relay is an http.Handler. It speaks NIP-01 on websocket upgrades, answers
// NIP-11 requests, and serves /metrics (Prometheus) and /healthz. Start listens
// on an address and returns a running Server; relaytest starts one on a free
// loopback port for tests.
//
// What cvm adds to khatru, which remains the event engine (policy hooks,
// storage and replacement semantics, NIP-11, NIP-40 sweeps):
//
//   - Its own websocket layer (conn.go, dispatch.go, and internal/wsconn,
//     shared with the MCPx gateway): a locked subscription index (khatru's
//     races under concurrent subscribe and broadcast), a bounded queue and
//     a batching writer per connection (khatru's synchronous fan-out lets
//     one stalled reader block every publisher), and live
//     listeners registered before the stored query (khatru's order loses
//     events published in between). See docs/architecture.md.
//   - Limits (limits.go): message size, subscriptions and filters per
//     connection, per-IP token buckets for events and new connections. Refusals
//     use NIP-01's machine-readable prefixes.
//   - Event policies (policy.go): NIP-40 expiration enforced on arrival and on
//     query, a bound on future timestamps, a retention time for kind 1059 gift
//     wraps, and, with Options.Auth, gift wraps served only to their
//     NIP-42-authenticated recipient. What is hidden is decided by one
//     function (visibility.go) that every read path calls: REQ, COUNT,
//     live delivery, NIP-09 lookups and the duplicate answer.
//   - NIP-09 deletion, checked before the request is stored: a refused
//     request is neither stored nor broadcast.
//
// Kind semantics (ephemeral, replaceable, addressable) are khatru's and the
// eventstore's.
//
// Files: relay.go (Options, New and the Relay that wires khatru, the store
// and the pieces above together), server.go (Start: a Relay on a listening
// address), metrics.go (the Prometheus metrics behind /metrics).
package relay
