// Package discovery reads ContextVM server announcements into a catalog and
// chooses among the servers that implement a common tool schema.
//
// A [Catalog] takes announcement events one at a time ([Catalog.Add]):
// kind 11316 (a server's initialize result and discovery tags), 11317–11320
// (its tools, resources, resource templates and prompts, with cap tags for
// prices and CEP-15 tags for common schemas), 10002 (its relays) and kind 5
// deletions of them. It keeps the newest event of each kind per server, as a
// relay keeps replaceable events, and skips anything malformed with a reason
// ([Catalog.Skipped]) instead of failing. Every schema hash a server claims
// is checked against the tool's own schemas before the catalog calls it
// verified.
//
// [Fetch] fills a catalog from relays, asking them to filter where the
// protocol lets them (#i for a schema hash, #t for a category) and filtering
// the rest itself; [Watch] keeps one current. [Catalog.Servers] lists what
// matches a [Filter]. [Catalog.Schemas] lists the common schemas claimed
// (schemas.go), and [Catalog.ResolveSchema] finds the one whose hash
// starts with what a person typed.
//
// For a common schema, [Catalog.Providers] lists the verified
// implementations in the order [Choose] prefers them (trusted first, then
// the better [Reputation] band, the cheapest, the fastest to answer,
// recent failures last), and [Call] calls the tool on the first that
// answers, failing over to the next (after a payment the caller declined,
// only to cheaper ones), with a [History] of the user's last
// calls to each server kept between runs (package reputation reads it too).
//
// Files: catalog.go (the Catalog: adding, deleting and parsing announcements
// into Servers), filter.go (Filter), prices.go (the announced prices of
// capabilities), schemas.go (common schemas and their hash prefixes),
// fetch.go (Fetch, FetchServer and Watch on relays) and authorwatch.go
// (Watch's subscription, split by author so that no REQ outgrows what relays
// take); choose.go (Providers, trust policies and Choose's order), call.go
// (Call and its failover), history.go (the History of the last calls to each server, in a
// file), historyconn.go (HistoryConn: the calls relayed through a
// connection, recorded);
// locate.go (Locate: which relays reach a server, and why), relaylist.go
// (what a client may use of a server's kind 10002 relay list) and
// relaycache.go (those lists, remembered in a file between runs). The
// catalog is the one shared state: fetching fills it, choosing and calling
// read it, and locating needs only a server's relay list.
package discovery
