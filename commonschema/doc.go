// Package commonschema implements ContextVM common tool schemas (CEP-15, seed
// 004): the schema hash that names a tool interface shared by many servers, the
// _meta field a server uses to claim it, the check a client makes before
// trusting that claim, and the NIP-73 tags that let clients find every server
// implementing a schema.
//
// # The hash
//
// A tool's schema hash is
//
//	sha256(JCS({name, inputSchema, outputSchema?}))
//
// in lowercase hex, where JCS is the RFC 8785 JSON Canonicalization Scheme
// (github.com/gowebpki/jcs). Before hashing, each schema is normalized the way
// the reference SDK (@contextvm/sdk, computeCommonSchemaHash) does it, because
// a hash only works if every implementation computes the same one:
//
//   - the members title, description, default, examples, deprecated, readOnly
//     and writeOnly, and every member whose name starts with "x-", are dropped
//     from every object at every depth;
//   - so is a member named "__proto__", which the reference loses as a side
//     effect of building its normalized copy by assignment in JavaScript;
//   - a "$ref" whose value is a string that does not start with "#" is an
//     external reference, and such a tool cannot be hashed (ErrExternalRef).
//
// The normalization does not know where schemas sit inside a schema: it also
// drops a property *named* title (or description, x-…) inside "properties",
// and it also rewrites values under const, enum and the like. cvm follows the
// reference here, so that hashes agree; [UncoveredProperties] lists what the
// hash leaves out so that tools can warn about it. The seed's draft hashed the
// raw schemas; interoperability with the reference decided.
//
// Input must be I-JSON (RFC 7493), as RFC 8785 requires: lone UTF-16
// surrogates, invalid UTF-8, duplicate member names and numbers outside the
// IEEE 754 double range are errors, never silently repaired, so a hash is
// never computed from something other than what the server sent.
//
// # Servers and clients
//
// A server declares a tool common with [Annotate], which writes the computed
// hash into the tool's _meta["io.contextvm/common-schema"].schemaHash, and
// adds the [Tags] to its kind 11317 announcement. A client reads a claim with
// [Claimed] and checks it with [VerifyClaim] (or [Verify]); a claim that does
// not match is reported as [ErrHashMismatch] with both hashes.
//
// docs/protocol-compatibility.md records where cvm and the reference differ.
//
// Files: hash.go (the normalization and the hash of a Tool), meta.go (a
// tool's _meta claim as it travels in JSON: Claimed, VerifyClaim, Annotate),
// tags.go (the announcement's tags), uncovered.go (UncoveredProperties: what
// the normalization leaves out of the hash), validate.go
// (ValidateArguments: a call's arguments against a tool's input schema,
// before anything is sent).
package commonschema
