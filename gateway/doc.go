// Package gateway puts an existing MCP server on Nostr: it takes the client
// sessions a contextvm.Server accepts and bridges their JSON-RPC messages to
// an upstream MCP server, a stdio child process (Command) or a streamable
// HTTP endpoint (HTTP), without an MCP session of its own in between. What
// the upstream says (its initialize result, notifications, requests to the
// client) reaches the client as the upstream said it.
//
//	client ─ relays ─ contextvm.Server ─ ServerConn per client ─┬─ per-client: one upstream session each
//	                                                            └─ shared: one upstream session for all
//
// Two session modes:
//
//   - PerClient (the default) gives each client session an upstream session
//     of its own (a child process, or an HTTP session), at most MaxSessions
//     at once, closed when idle. Everything passes through unchanged;
//     messages the upstream sends before its initialize response are held
//     back until the client has that response. The sessions of clients
//     that send requests without initialize (stateless clients, CEP-35:
//     a one-shot cvm call) share one upstream session instead, as in
//     Shared mode, started with the first and closed after the last: they
//     declared no capabilities, so the upstream is told of none and may ask
//     them nothing, they get no broadcasts, and a one-shot client costs no
//     process. What the upstream keeps between calls they share among
//     themselves; IsolateStateless gives them a session each.
//   - Shared runs one upstream session for every client. The gateway
//     initializes it once and answers each client's initialize from that
//     result, renumbers requests and progress tokens so that clients never
//     collide, subscribes upstream once per resource and delivers updates
//     to the clients that subscribed. Its limits are inherent: a request
//     from the upstream to a client (sampling, elicitation, roots) reaches a
//     client only when exactly one client has requests in flight, and is
//     refused with an error otherwise; logging levels and roots are not per
//     client.
//
// An upstream that dies is restarted with backoff and initialized again with
// the same parameters; requests in flight when it died are answered with an
// error at once, never left to time out. Who may call what is the
// contextvm.Server's business (AllowedClients, PublicCapabilities): a
// refused request never reaches the gateway, let alone the upstream.
// Handler serves Prometheus metrics and a health check.
//
// The same sessions are served over MCP streamable HTTP too: HTTPHandler
// is the MCP endpoint with its hooks (authentication, payments), and
// ListenHTTP the whole endpoint assembled from one options struct: the
// listener, DIDAuthV1 verification (package didauth), the gateway's DID
// document, NIP-10 quotations (package payments/quotation).
//
// Files: gateway.go (the Gateway, its sessions, bound and idle reaping),
// upstream.go and http.go (where upstream sessions come from), perclient.go
// and shared.go (the two modes), stateless.go (PerClient mode's shared
// upstream for stateless clients), httpserver.go (HTTPHandler) and
// endpoint.go (ListenHTTP), replicas.go, announce.go, metrics.go,
// message.go (error codes). A
// supervised upstream session (handshake, restart) is an mcpmux.Link, and
// Shared mode is an mcpmux.Mux: the room bridge (mcpx/bridge) shares both.
package gateway
