// Package market is the ContextVM marketplace as one MCP server an agent's
// host runs (cvm market): it reads the servers' announcements from relays
// into a discovery catalog, and offers four tools on it.
//
//   - search (search.go): tools by words, common schema, category and
//     maximum price, ranked as discovery.Choose ranks providers (trust,
//     reputation band, price), each with why;
//   - describe (describe.go): a server's tools with their schemas and
//     prices, or a common schema's providers;
//   - call (call.go): a tool on one server, or on the best provider of a
//     common schema with discovery.Call's failover (the policy of cvm
//     call --schema). Arguments are checked against the announced input
//     schema and the price against what is left of the budget before
//     anything is sent (pay.go); the call is paid with the user's
//     cep8.PayOptions, each payment confirmed through the host's
//     elicitation when it declared the capability on a protocol version
//     that lets a server ask while it serves a call (before 2026-07-28),
//     by the configured policy otherwise; the provider's progress
//     notifications are passed on to the host under its own token;
//   - budget (budget.go): what was spent today, per server, and what is
//     left, from the payments.Budget every cvm on the machine shares.
//
// Mount (mount.go) offers the tools of chosen servers, or of common
// schemas on their best provider, as the market's own, namespaced, while it
// follows the catalog: a change of them changes the market's tool list,
// which hosts are told of (notifications/tools/list_changed). Their calls
// go through call, with its checks and payments.
//
// A refusal is a tool error (isError) that says what to do. market.go
// holds the options, the catalog read and the ranking; tools.go the
// registration. FuzzMountedTool (mount_test.go) feeds mounting hostile
// announcements: tool names and schemas anyone may publish.
package market
