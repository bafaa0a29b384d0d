package mcpmsg

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Token is a progress token as it travels on the wire: a JSON string or
// number. Tokens are comparable, and equal exactly when they are the same
// JSON value, so 1 and "1" differ while 1 and 1.0 do not. The zero Token is
// no token.
type Token struct {
	// raw is the token's canonical JSON: the value decoded and encoded
	// again, as every JSON peer re-encodes a token it echoes.
	raw string
}

// TokenOf makes a token from a Go value: a string or a number.
func TokenOf(v any) (Token, error) {
	switch v.(type) {
	case string, float64, float32, int, int32, int64, uint, uint32, uint64, json.Number:
	default:
		return Token{}, fmt.Errorf("mcpmsg: a progress token is a string or a number, not %T", v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Token{}, err
	}
	return parseToken(b)
}

// StringToken is the token s, a string.
func StringToken(s string) Token {
	b, _ := json.Marshal(s) // a string always encodes
	return Token{raw: string(b)}
}

// parseToken reads a token from its JSON; null or absent is the zero Token.
func parseToken(raw json.RawMessage) (Token, error) {
	if IsNull(raw) {
		return Token{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return Token{}, fmt.Errorf("mcpmsg: progress token: %w", err)
	}
	switch v.(type) {
	case string, float64:
	default:
		return Token{}, fmt.Errorf("mcpmsg: a progress token is a string or a number, not %s", raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Token{}, err
	}
	return Token{raw: string(b)}, nil
}

// IsZero reports whether t is no token.
func (t Token) IsZero() bool { return t.raw == "" }

// String is the token's JSON.
func (t Token) String() string { return t.raw }

// JSON is the token's JSON, nil for the zero Token.
func (t Token) JSON() json.RawMessage {
	if t.raw == "" {
		return nil
	}
	return json.RawMessage(t.raw)
}

// Value is the token as encoding/json decodes it: a string or a float64,
// nil for the zero Token.
func (t Token) Value() any {
	if t.raw == "" {
		return nil
	}
	var v any
	json.Unmarshal([]byte(t.raw), &v)
	return v
}

// MarshalJSON encodes the token; the zero Token is null.
func (t Token) MarshalJSON() ([]byte, error) {
	if t.raw == "" {
		return []byte("null"), nil
	}
	return []byte(t.raw), nil
}

// UnmarshalJSON reads a string or a number; null is the zero Token.
func (t *Token) UnmarshalJSON(b []byte) error {
	tok, err := parseToken(b)
	if err != nil {
		return err
	}
	*t = tok
	return nil
}

// ProgressToken returns the progress token a message carries: for
// notifications/progress, params.progressToken (the request it reports on);
// for any other request or notification, params._meta.progressToken (the
// token it asks progress under). ok is false when there is none, or when it
// is neither a string nor a number.
func ProgressToken(m *jsonrpc.Request) (tok Token, ok bool) {
	return ParamsToken(m.Method, m.Params)
}

// ParamsToken is ProgressToken for a message known by its method and params.
func ParamsToken(method string, params json.RawMessage) (tok Token, ok bool) {
	if IsNull(params) {
		return Token{}, false
	}
	var raw json.RawMessage
	if method == MethodProgress {
		var p struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(params, &p) != nil {
			return Token{}, false
		}
		raw = p.ProgressToken
	} else {
		var p struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		if json.Unmarshal(params, &p) != nil {
			return Token{}, false
		}
		raw = p.Meta.ProgressToken
	}
	tok, err := parseToken(raw)
	if err != nil || tok.IsZero() {
		return Token{}, false
	}
	return tok, true
}

// WithProgressToken returns a copy of m whose progress token (where
// ProgressToken looks for it) is tok, every other member of params kept
// byte for byte. m is not modified.
func WithProgressToken(m *jsonrpc.Request, tok Token) (*jsonrpc.Request, error) {
	path := []string{"_meta", "progressToken"}
	if m.Method == MethodProgress {
		path = path[1:]
	}
	params, err := SetMember(m.Params, tok.JSON(), path...)
	if err != nil {
		return nil, fmt.Errorf("mcpmsg: %s params: %w", m.Method, err)
	}
	out := *m
	out.Params = params
	return &out, nil
}
