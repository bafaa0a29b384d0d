// Package participant is an MCPx v0 participant in Go: a Client joins a
// topic of a room gateway and stays there, reconnecting with backoff and
// resuming from history by seq, so that nothing is lost or seen twice.
// Peers are MCP servers: the client performs one MCP handshake per peer,
// correlates requests by envelope, renumbers ids and progress tokens so
// that several local sessions can share one session with a peer, cancels
// what times out, presents each peer to a go-sdk client (PeerTransport),
// and answers peers with a go-sdk server (SDKServer) or any PeerServer.
//
// client.go is the Client: options, its goroutines and Close. The other
// files follow an envelope: connection.go (dial, welcome, reconnect,
// catch-up from history), dispatch.go (what each envelope means), calls.go
// (requests to peers: wire ids, progress tokens, timeouts, cancellation)
// over pending.go (the table of requests in flight) and rpc.go (JSON-RPC
// encoding), peer.go (one handshake per peer, with backoff), sessions.go
// (the per-peer mcp.Connections), outbox.go (what was sent but not
// confirmed, re-checked after a reconnect), confirm.go (a send that waits
// until the gateway stored or refused it, sending again after
// rate_limited: SayConfirmed), chat.go (chat messages, seed 001 §8.1) and
// tools.go (the default server's chat.say and presence.get, §8.2).
//
// A Client is safe for concurrent use; Close waits for every goroutine it
// started.
package participant
