package commonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The functions in this file work on a tool object as it travels in a
// tools/list result or a kind 11317 announcement: raw JSON, of which they read
// or change only _meta["io.contextvm/common-schema"].schemaHash.

// Claimed returns the schema hash that tool (a JSON tool object) claims in
// _meta["io.contextvm/common-schema"].schemaHash. ok is false when it claims
// none, which is also how the reference reads a claim that is not a string or
// a tool that is not an object: such a tool is bespoke, never verified.
func Claimed(tool []byte) (hash string, ok bool) {
	top, ok := members(tool)
	if !ok {
		return "", false
	}
	meta, ok := members(top["_meta"])
	if !ok {
		return "", false
	}
	ns, ok := members(meta[Namespace])
	if !ok {
		return "", false
	}
	// Only a string is a claim; json.Unmarshal alone would accept null.
	raw := ns["schemaHash"]
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &hash) != nil {
		return "", false
	}
	return hash, true
}

// VerifyClaim checks the schema hash that tool (a JSON tool object) claims
// against the hash of its own schemas, and returns the hash when they agree.
// It fails with ErrNoClaim for a tool that claims nothing, ErrHashMismatch
// (naming both hashes) for a false claim, and ErrInvalidTool or
// ErrExternalRef for a tool that cannot be hashed, which therefore cannot be
// verified either.
func VerifyClaim(tool []byte) (string, error) {
	claimed, ok := Claimed(tool)
	if !ok {
		return "", ErrNoClaim
	}
	var t Tool
	if err := json.Unmarshal(tool, &t); err != nil {
		return "", err
	}
	if err := Verify(t, claimed); err != nil {
		return "", err
	}
	return claimed, nil
}

// Annotate is what a server does to each tool it declares common: it computes
// the tool's schema hash and returns the tool with the hash in
// _meta["io.contextvm/common-schema"].schemaHash, keeping every other member,
// every other _meta entry and every other field of the namespace object. A
// tool that already carries the right hash is returned unchanged.
//
// A claim already present is replaced by the computed hash. The reference
// keeps an existing claim instead; cvm never advertises a hash that a
// verifying client would reject, for instance one an upstream MCP server
// behind a gateway computed from other schemas.
func Annotate(tool []byte) (annotated []byte, hash string, err error) {
	var t Tool
	if err := json.Unmarshal(tool, &t); err != nil {
		return nil, "", err
	}
	if hash, err = Hash(t); err != nil {
		return nil, "", err
	}
	if claimed, ok := Claimed(tool); ok && claimed == hash {
		return tool, hash, nil
	}
	top, _ := members(tool) // Unmarshal above proved tool is an object
	meta, ok := members(top["_meta"])
	if !ok {
		meta = map[string]json.RawMessage{}
	}
	ns, ok := members(meta[Namespace])
	if !ok {
		ns = map[string]json.RawMessage{}
	}
	if ns["schemaHash"], err = marshal(hash); err != nil {
		return nil, "", err
	}
	if meta[Namespace], err = marshal(ns); err != nil {
		return nil, "", err
	}
	if top["_meta"], err = marshal(meta); err != nil {
		return nil, "", err
	}
	if annotated, err = marshal(top); err != nil {
		return nil, "", err
	}
	return annotated, hash, nil
}

// members decodes a JSON object into its members, unparsed. ok is false for
// anything that is not an object.
func members(raw []byte) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

// marshal encodes v without escaping <, > and &, so that strings in the
// members Annotate passes through are not rewritten.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode tool: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
