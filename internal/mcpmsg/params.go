package mcpmsg

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// Marshal encodes v without HTML escaping: MCP payloads are not HTML, and
// peers compare text byte for byte. A json.RawMessage is returned as it is,
// and nil as nil: params that are absent stay absent.
func Marshal(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// SetMember returns the JSON object obj with the member at path set to
// value, or removed when value is nil; every other member keeps its bytes.
// path names nested objects, created where missing:
// SetMember(params, tok, "_meta", "progressToken"). An absent or null obj is
// an empty object; anything else that is not an object is an error.
func SetMember(obj json.RawMessage, value json.RawMessage, path ...string) (json.RawMessage, error) {
	if len(path) == 0 {
		return nil, fmt.Errorf("mcpmsg: SetMember needs a path")
	}
	m := map[string]json.RawMessage{}
	if !IsNull(obj) {
		if err := json.Unmarshal(obj, &m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %w", err)
		}
	}
	key := path[0]
	if len(path) > 1 {
		inner, err := SetMember(m[key], value, path[1:]...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		value = inner
	}
	if value == nil {
		delete(m, key)
	} else {
		m[key] = value
	}
	return Marshal(m)
}

// SetMeta returns params with params._meta[key] set to value, keeping
// everything else. Params that are not an object are returned unchanged:
// a relay passes on what it cannot edit rather than failing the request.
func SetMeta(params json.RawMessage, key string, value any) json.RawMessage {
	raw, err := Marshal(value)
	if err != nil {
		return params
	}
	out, err := SetMember(params, raw, "_meta", key)
	if err != nil {
		return params
	}
	return out
}

// StringParam returns the string member name of params (a resource's uri, a
// tool's name), or "" if there is none.
func StringParam(params json.RawMessage, name string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil {
		return ""
	}
	var s string
	json.Unmarshal(obj[name], &s)
	return s
}
