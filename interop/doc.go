// Package interop holds cvm's tests against peers nobody in this project
// wrote: nostr-tools, the @contextvm/sdk reference peers, MCP servers from the
// npm registry and a third-party relay, all on loopback.
//
// The Node packages are pinned in package.json and package-lock.json; run
// `make interop-deps` (npm ci) once before `go test ./interop`. The scripts in
// js/ print one JSON object each (js/market-host.mjs, the host that drives cvm
// market, one JSON line per market tool call); the Go tests decide what it
// must say. Packages whose dependencies conflict with these have folders of
// their own (identitykit, payments, cashu, typescript, inspector: the MCP
// Inspector, whose --cli mode drives cvm market).
package interop
