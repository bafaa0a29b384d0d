package commonschema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Namespace is the key of the common-schema object in a tool's _meta and the
// value of the NIP-73 "k" tag that marks an announcement carrying schema
// hashes.
const Namespace = "io.contextvm/common-schema"

var (
	// ErrInvalidTool is returned, wrapped, for a tool definition that cannot
	// be hashed: no name, no inputSchema, a schema that is not a JSON object,
	// or JSON that RFC 8785 cannot canonicalize.
	ErrInvalidTool = errors.New("invalid tool definition")

	// ErrExternalRef is returned, wrapped, for a schema holding a "$ref" to
	// another document. The hash would name a schema whose meaning lives
	// elsewhere, so the reference refuses it; so does cvm.
	ErrExternalRef = errors.New("external $ref (resolve it before hashing)")

	// ErrHashMismatch is returned, wrapped with both hashes, when a claimed
	// schema hash is not the one the tool's schemas produce. A client must not
	// treat such a tool as an implementation of the claimed schema.
	ErrHashMismatch = errors.New("schema hash mismatch")

	// ErrNoClaim is returned by VerifyClaim for a tool that claims no common
	// schema: a bespoke tool, not an error in the tool.
	ErrNoClaim = errors.New("tool claims no common schema")
)

// Tool is the part of an MCP tool definition that the schema hash covers.
// Decoding a full tool object from a tools/list result into a Tool keeps these
// three members and ignores the rest (description, annotations, _meta, …).
type Tool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is optional. Nil and JSON null both mean the tool has none:
	// the reference leaves the member out of the hashed payload in both cases.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// UnmarshalJSON reads the hashed members of a tool object. It differs from
// encoding/json's default in two ways that keep the hash equal to the one a
// JavaScript peer computes: member names match exactly (JavaScript reads
// tool.name, never tool.Name), and a name that is not well-formed Unicode is
// an error instead of being silently turned into U+FFFD. As for any
// Unmarshaler, JSON null leaves t unchanged.
func (t *Tool) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidTool)
	}
	// A map, not a struct: duplicate members resolve to the last one, as
	// JSON.parse does, and names are matched exactly.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	var out Tool
	if raw, ok := members["name"]; ok {
		if len(raw) == 0 || raw[0] != '"' {
			return fmt.Errorf("%w: name is not a string", ErrInvalidTool)
		}
		// Canonicalizing first rejects what json.Unmarshal would repair.
		if _, err := canonicalize(raw, "name"); err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &out.Name); err != nil {
			return fmt.Errorf("%w: name: %w", ErrInvalidTool, err)
		}
	}
	out.InputSchema = members["inputSchema"]
	if raw := members["outputSchema"]; string(raw) != "null" {
		out.OutputSchema = raw
	}
	*t = out
	return nil
}

// Hash returns the CEP-15 schema hash of t as 64 lowercase hex digits: the
// SHA-256 of the RFC 8785 canonical form of {name, inputSchema,
// outputSchema?}, each schema normalized as the package documentation
// describes. It fails with ErrInvalidTool or ErrExternalRef.
func Hash(t Tool) (string, error) {
	payload, err := canonicalPayload(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:]), nil
}

// Verify checks that claimed is t's schema hash. A claim that does not match
// yields an error wrapping ErrHashMismatch that names both hashes. The
// comparison is exact: hashes are lowercase hex, and relays match "#i"
// filters exactly, so an uppercase claim would not be found by discovery
// either.
func Verify(t Tool, claimed string) error {
	computed, err := Hash(t)
	if err != nil {
		return err
	}
	if claimed != computed {
		return fmt.Errorf("%w: tool %s claims %s, its schemas hash to %s",
			ErrHashMismatch, quote(t.Name), quote(claimed), computed)
	}
	return nil
}

// canonicalPayload returns the exact bytes Hash hashes.
func canonicalPayload(t Tool) ([]byte, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("%w: missing name", ErrInvalidTool)
	}
	if !utf8.ValidString(t.Name) {
		return nil, fmt.Errorf("%w: name is not valid UTF-8", ErrInvalidTool)
	}
	if len(t.InputSchema) == 0 {
		return nil, fmt.Errorf("%w: missing inputSchema", ErrInvalidTool)
	}
	in, err := normalizedSchema(t.InputSchema, "inputSchema")
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fmt.Errorf("%w: inputSchema is null", ErrInvalidTool)
	}
	payload := map[string]any{"name": t.Name, "inputSchema": in}
	if len(t.OutputSchema) > 0 {
		out, err := normalizedSchema(t.OutputSchema, "outputSchema")
		if err != nil {
			return nil, err
		}
		if out != nil {
			payload["outputSchema"] = out
		}
	}
	// encoding/json writes the tree (sorting keys by bytes, escaping <, >
	// and &); jcs then puts it in canonical form (sorting by UTF-16 code
	// units, escaping only what RFC 8785 escapes). Numbers pass through as
	// the canonical text the first canonicalization produced.
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	out, err := jcs.Transform(b)
	if err != nil {
		// Unreachable: the tree came from canonical JSON.
		return nil, fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	return out, nil
}

// normalizedSchema canonicalizes one schema, checks that it is an object (or
// null, returned as nil: an absent outputSchema) and normalizes it.
func normalizedSchema(raw json.RawMessage, field string) (map[string]any, error) {
	v, err := decodeCanonical(raw, field)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrInvalidTool, field)
	}
	n, err := normalize(obj, "/"+field)
	if err != nil {
		return nil, err
	}
	return n.(map[string]any), nil
}

// decodeCanonical canonicalizes raw and decodes the result. Decoding the
// canonical form rather than raw is what makes it lossless: canonical strings
// hold no escapes encoding/json would repair, and json.Number keeps each
// number as the text RFC 8785 chose for it.
func decodeCanonical(raw []byte, field string) (any, error) {
	c, err := canonicalize(raw, field)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(c))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidTool, field, err)
	}
	return v, nil
}

// canonicalize runs RFC 8785 over raw and, when that fails, says why in words
// a user can act on.
func canonicalize(raw []byte, field string) ([]byte, error) {
	c, err := jcs.Transform(raw)
	if err == nil {
		return c, nil
	}
	switch esc, lone := loneSurrogate(raw); {
	case lone:
		return nil, fmt.Errorf("%w: %s holds the lone UTF-16 surrogate %s, which RFC 8785 cannot canonicalize", ErrInvalidTool, field, esc)
	case !utf8.Valid(raw):
		return nil, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidTool, field)
	case !json.Valid(raw):
		// encoding/json's syntax errors say where; jcs's often do not.
		var v any
		return nil, fmt.Errorf("%w: %s is not valid JSON: %w", ErrInvalidTool, field, json.Unmarshal(raw, &v))
	}
	return nil, fmt.Errorf("%w: %s cannot be canonicalized (RFC 8785): %w", ErrInvalidTool, field, err)
}

// dropped reports whether the reference removes an object member with this
// name before hashing. These members document a schema without changing what
// it accepts, so implementers may word them freely.
func dropped(name string) bool {
	switch name {
	case "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly":
		return true
	}
	return strings.HasPrefix(name, "x-")
}

// protoKey is the one member name JavaScript cannot create by assignment:
// `normalized["__proto__"] = v` sets the new object's prototype instead, so
// the reference's normalized copy never holds it and the hash never covers
// it. The value is still normalized first, as the reference does, so an
// external $ref inside it is still an error.
const protoKey = "__proto__"

// normalize returns v with the dropped members removed from every object at
// every depth, and fails on an external $ref. ptr is v's JSON Pointer within
// the tool, for error messages.
func normalize(v any, ptr string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		// Sorted, so that of several errors the same one is reported every time.
		for _, name := range slices.Sorted(maps.Keys(v)) {
			if dropped(name) {
				continue
			}
			child := v[name]
			childPtr := ptr + "/" + escapePointer(name)
			if s, ok := child.(string); ok && name == "$ref" && !strings.HasPrefix(s, "#") {
				return nil, fmt.Errorf("%w: %s at %s", ErrExternalRef, quote(s), childPtr)
			}
			n, err := normalize(child, childPtr)
			if err != nil {
				return nil, err
			}
			if name != protoKey {
				out[name] = n
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := normalize(e, ptr+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	default:
		return v, nil
	}
}

// escapePointer escapes a member name for a JSON Pointer (RFC 6901).
func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// loneSurrogate finds the first \u escape in JSON text that encodes half of
// a UTF-16 surrogate pair without the other half.
func loneSurrogate(data []byte) (string, bool) {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := uEscape(data, i)
		if !ok {
			i++ // skip the escaped character, which may itself be a backslash
			continue
		}
		switch {
		case 0xD800 <= r && r <= 0xDBFF:
			if lo, ok := uEscape(data, i+6); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				i += 11
				continue
			}
			return string(data[i : i+6]), true
		case 0xDC00 <= r && r <= 0xDFFF:
			return string(data[i : i+6]), true
		}
		i += 5
	}
	return "", false
}

// uEscape decodes the \uXXXX escape at data[i:], if there is one.
func uEscape(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}

// quote renders a string from the network for an error message: quoted, so
// it cannot break a log line, and short, so it cannot flood one.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
