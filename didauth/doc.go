// Package didauth signs and verifies MCP requests over HTTP with the
// requester's DID (seed 003, NIP-10 §3.2–3.3, on NIP-2's DIDAuthV1 header):
//
//	Authorization: DIDAuthV1 u<base64url(JSON {"signed_data":{…},"signature":{"signer_did","key_id","value"}})>
//
// The credentials' signature covers separator ‖ canonical(signed_data).
// Two modes share that envelope:
//
//   - Strict (the default): signed_data is a Payload binding the request —
//     HTTP method, path, SHA-256 of the body (the whole JSON-RPC message),
//     audience (the server's endpoint URL or DID), the key id, nonce and
//     timestamp — and
//     is canonicalized by RFC 8785 (JCS). The separator written is
//     MCP_NIP10_AUTH_V1: (the seed's); MCP_NIP7_AUTH_V1: (the NIP's later
//     name) is accepted, never written.
//   - Compatibility (off unless asked for): exactly the headers of
//     @nuwa-ai/identity-kit 0.6.0, separator DIDAuthV1: and the kit's
//     canonicalization, which drops every nested field whose name is not
//     also a top-level key. Such a header binds only the DID, nonce,
//     timestamp and top-level strings: its params (tool name, URL, body) can
//     be changed in flight and it still verifies, and nothing in it names
//     the server it was meant for unless it carries a top-level audience. A
//     Verifier in this mode logs so once.
//
// A Verifier checks a request (Middleware wraps an http.Handler): the DID
// is resolved, the key must be in its document and authorized for
// authentication, the signature must verify, the audience must be the
// server's, the timestamp within Window of now, and the nonce never seen
// before within that window (kept in a durable.Store, so restarts do not
// reopen it). Caller gives handlers the verified DID, CallerKey the key it
// was verified with (what signs a payment channel's receipts). Transport
// signs every request a client sends.
//
// Files: header.go (the DIDAuthV1 header: credentials, separators, encoding
// and decoding), canonical.go (the two canonical forms, JCS and the kit's),
// sign.go (modes, the strict Payload, signing), transport.go (the client's
// signing RoundTripper), verifier.go (the Verifier, its nonce book in the
// store, and the Middleware), codes.go (the error codes a refused request is
// answered with). Signing and verifying meet only in header.go and
// canonical.go: what one writes the other reads back byte for byte.
package didauth
