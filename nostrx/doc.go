// Package nostrx holds the Nostr plumbing that cvm's protocols share: parsing
// public and secret keys in every form users paste (hex, npub, nprofile, nsec),
// and key files that are safe to leave on disk.
//
// Keys are the types of fiatjaf.com/nostr. A secret key never appears in an
// error message or a log line produced by this package: errors describe what is
// wrong with the input, not the input.
//
// Files: keys.go (parsing keys), keyfile.go (0600 key files), relayurl.go
// (ParseRelayURL: which relay URLs a pool may dial), pool.go (the Pool,
// publishing and subscribing across relays, with each event checked) and
// relayconn.go (its connection to one relay: the run loop that dials, reads,
// redials and resumes subscriptions).
package nostrx
