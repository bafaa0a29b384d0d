// Package did holds the decentralized identifiers (DIDs) that sign and
// verify MCP requests over HTTP (seed 003, NIP-10): parsing, DID documents,
// resolution and the keys behind them.
//
// Three methods are resolved:
//
//   - did:key (Ed25519, secp256k1 and P-256; for P-256 both the standard
//     multicodec prefix and the one @nuwa-ai/identity-kit 0.6.0 writes),
//     derived from the identifier alone;
//   - did:nostr:<64-hex public key>, a Nostr key as a DID, also resolved
//     locally: one secp256k1 key, authorized for authentication, that signs
//     with BIP-340 Schnorr. It is the same principal as the Nostr key (see
//     Principal), so one allow-list serves Nostr and HTTP;
//   - did:web, fetched over HTTPS (plain HTTP only for loopback hosts, which
//     tests use) through an outbound.Fetcher: public addresses only, no
//     redirects (another host would answer for the DID), served as JSON,
//     256 KiB at most. Tests let their loopback servers through by exact
//     address (outbound/outboundtest).
//
// A Resolver turns a DID into its Document; NewResolver gives one with a
// bounded cache. A Signer signs as a DID: NostrSigner from a Nostr secret
// key, or a did:key loaded from a 0600 file (ReadKeyFile, WriteKeyFile).
// ServerDocument builds the document a server publishes at
// /.well-known/did.json, naming its MCP endpoint in a service of type
// MCPServiceV1.
//
// Files: did.go (parsing DIDs and DID URLs), document.go (DID documents and
// their verification methods), keys.go (public keys by algorithm, and
// verifying with them), multibase.go (the base58btc and base64url multibase
// encodings of key material), resolver.go (the Resolver, did:key, did:nostr
// and the cached did:web fetch), signer.go (Signers and the 0600 key file),
// principal.go (one name for a DID and the Nostr key it may be). A Verifier
// elsewhere (package didauth) holds only a Resolver and checks a signature
// with the PublicKey the resolved Document gives.
package did
