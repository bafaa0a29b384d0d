// Package secp holds the secp256k1 operations on cvm's hot paths that
// fiatjaf.com/nostr does not switch by itself: BIP-340 signing with a key
// parsed once, and NIP-44 v2 key agreement. It has two backends, chosen at
// build time like nostr.Event.Sign and VerifySignature are: pure Go
// (btcec/dcrd) by default, and with -tags libsecp256k1 the C libsecp256k1
// that fiatjaf.com/nostr bundles and compiles into its own cgo object. This
// package links against that one copy instead of compiling a second (the
// two would clash at link time), so it only uses the library's public API.
//
// Files: secp.go (what both backends offer), purego.go (the default
// backend), libsecp256k1.go (the backend of -tags libsecp256k1).
package secp

import "errors"

// ErrInvalidKey is returned, wrapped, for a secret key that is zero or not
// below the group order, or a public key that is not on the curve.
var ErrInvalidKey = errors.New("secp256k1: invalid key")
