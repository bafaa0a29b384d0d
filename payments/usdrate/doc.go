// Package usdrate is a source of the bitcoin price in US dollars, for
// converting prices announced in usd into the sats every payment rail
// states and moves (payments.Rates; the rule is in
// docs/protocol-compatibility.md).
//
// The operator names the source: an HTTP(S) endpoint that answers JSON and
// a JSON pointer (RFC 6901) to the price in it, a number or a string
// holding one, e.g. https://api.coinbase.com/v2/prices/BTC-USD/spot with
// /data/amount. It is fetched through an outbound.Fetcher (public
// addresses only, no redirects, a bounded body), and the rate kept for a
// TTL (60 s by default); callers that ask while it is fetched share the
// one fetch. A source that fails, answers what the pointer does not find,
// or a price that is not a positive number, is an error: the caller
// refuses the payment rather than guess.
//
// Files: source.go (Options, Source: fetching, caching, sharing a fetch),
// parse.go (the JSON pointer and the price it points at, the parsing of
// an untrusted answer, fuzzed in parse_test.go).
package usdrate
