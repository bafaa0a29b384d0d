// Package catalogpage is the browser page of cvm discover --serve: the
// catalog of announced ContextVM servers, live, with filters kept in the
// URL, pictures fetched by cvm and served from its own origin, and "try
// it": a tool called by the page's server with the operator's identity,
// paid for only after the person confirms the announced price.
//
// Because "try it" spends the operator's identity and wallet, every
// request must name this server in its Host header (against DNS
// rebinding), and every call must come from this server's own page: same
// origin, a JSON body (which a form on another site cannot send), and the
// per-page token the page was served with. A priced call needs a second
// request carrying a single-use quote that only the page has seen.
//
// A picture URL is chosen by whoever announced the server, so it is
// fetched through an outbound.Fetcher (Options.Fetcher): public addresses
// only, on every redirect, within a size and a time limit, and served only
// if its bytes are a PNG, JPEG, GIF or WebP image. Otherwise anyone could
// make the page fetch, and show back, what only the operator's network
// reaches.
//
// A filter that names tools (by name, schema or price) marks them in the
// list, so the page can show them first and fold the others away. A tool's
// "try it" panel opens in its item, right under the button clicked, and
// moves with the tool, as it is, when the list is rebuilt.
//
// Given Options.Reputation (cvm discover --serve --sort reputation), the
// list comes ranked by package reputation, each server with its score and
// the reason, shown as text; sort=name in the URL keeps the name order.
//
// The page fetches the list before it opens the event stream, and reads
// the stream in a worker: a request the page itself keeps open would stop
// the virtual time of headless screenshot tools, which would never see
// the list.
//
// A server's profile, notes and reviews (CEP-23, CEP-24) are read when
// the person opens them (Options.Social), and shown as text like every
// other stranger's string. The operator's own review spends the page's
// identity, so it is guarded as "try it" is and, like a payment, needs a
// second request carrying a single-use quote for exactly that review.
// /schema/HASH and /category/NAME are the page with that filter fixed by
// the path, linked from the list.
//
// Files: catalogpage.go (Options, the Page and its routes: the index, the
// server list and its filters, the event stream, "try it" and its quotes),
// social.go (profiles, notes and reviews; the operator's review), pages.go
// (the schema and category pages),
// callstream.go (how a "try it" call goes, streamed to the page: the
// Reporter a Caller tells, step by step), picture.go (pictures: fetched
// once, cached, served from this origin), usdrate.go (usd prices listed
// with their sats at Options.Rates; "try it" quotes them in sats),
// assets/ (the page itself:
// catalog.js, and events.js, the worker reading the event stream).
package catalogpage
