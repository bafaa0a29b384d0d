// Package mcpmux keeps upstream MCP sessions for relays that have no MCP
// session of their own: the ContextVM gateway (package gateway) and the
// MCPx room bridge (package mcpx/bridge).
//
// A Link is one upstream session that outlives its connection: it performs
// the initialize handshake itself, and when the connection ends (a child
// process died) it answers for what was in flight through its Handler,
// reconnects with a jittered backoff, and initializes again with the same
// parameters. Every write names the connection (generation) it is meant
// for, so a request never reaches a replacement its caller knows nothing
// about.
//
// A Mux serves many callers through one Link. The upstream knows one
// client, the mux, so everything that identifies a caller's request is
// renumbered on the way up and restored on the way down: request ids and
// progress tokens. Resource subscriptions are counted (the upstream is
// subscribed once per resource, and unsubscribed when the last subscriber
// leaves); cancellations are translated; what the upstream sends on its own
// goes to whom it concerns (progress to the caller of the request, resource
// updates to the subscribers, list changes and log messages to everyone);
// a request of the upstream's (sampling, elicitation) goes to the caller
// whose call caused it, as far as that can be told (see Routing). Roots
// are not offered: a shared session has no single answer to roots/list.
//
// Files: upstream.go (where connections come from: Upstream,
// OpenCommand), child.go (a child process and the process group it leads,
// stopped as a whole; group_unix.go and group_other.go), link.go (one supervised session), mux.go (the Mux and its
// handling of the upstream), session.go (one caller), tables.go (the
// books: calls in flight, requests routed to callers, subscriptions).
package mcpmux
