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
// Lifetimes: a Server, each ServerConn and each client connection own
// everything they start, through a lifetime (lifetime.go): goroutines,
// timers and the calls under way on their callers' goroutines all run under
// a context that Close cancels, and Close returns only once all of it has
// returned. After Close nothing of theirs is published and no timer of
// theirs fires.
//
// Features that not every peer has plug in from outside through small
// interfaces declared here, where the core calls them, in the manner of
// the go-sdk's middleware and khatru's hooks:
//
//   - a Coordinator (coordinator.go; ServerOptions.Replicas) makes a server
//     one replica of a group: the router asks it whether to act on each
//     message (package contextvm/replica, on NATS);
//   - a Gate (gate.go; ServerOptions.Gate) is shown each request before the
//     MCP handler and may hold it, refuse it or answer it (an error or a
//     result of its own), and add to the _meta of the result of a call it
//     let run: package contextvm/cep8 collects prices (CEP-8) and serves
//     payment channels;
//   - a Payer (payment.go; ClientOptions.Payer) decides on and makes the
//     payments a server asks a client for, may add tags to each request it
//     sends (knowing the server's pmi tags and prices), and reads every
//     answer (package contextvm/cep8).
//
// What a server lends its features is a Host (host.go); what they act on
// is an Inbound (a message on its way in), a Call (a request a session
// received) or a PaidCall (a client's request a server asked payment
// for). A peer with none of them set is a plain ContextVM peer: it acts on
// every message, runs every request, and declines every payment (the
// protocol of CEP-8 that every client needs, the notifications and the
// decline, is payment.go's).
//
// Files: codec.go (message ⇄ event), wrap.go (CEP-4/19 gift wraps),
// peer.go (discovery tags, CEP-35), client.go (the client transport),
// pending.go (its requests in flight) and encryption.go (how it chooses
// between gift wraps and plaintext, and finds out it chose wrong),
// payment.go (CEP-8 on the client: the payment notifications, offers and
// declines, the Payer seam), server.go, sessions.go, session.go
// and routes.go (the server, its book of sessions, a session, a session's
// requests in flight), batch.go (a JSON-RPC batch's answers, sent as one),
// endpoint.go (what both share), codes.go (the
// JSON-RPC error codes), lifetime.go and registry.go (what owners are built
// from), fragment.go and oversized.go (CEP-22), stream.go (CEP-41),
// auth.go and replay.go, announce.go, unannounce.go and pricing.go (prices
// as advertised, and the capability a request uses); coordinator.go,
// gate.go and host.go (the server's seams); kinds.go, modes.go, signer.go
// (event kinds, encryption modes, signers).
package contextvm
