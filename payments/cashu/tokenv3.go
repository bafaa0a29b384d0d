package cashu

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// tokenV3 is the JSON of a cashuA token (NUT-00, deprecated: read for
// compatibility, written for the tests that show cashu-ts reads it).
type tokenV3 struct {
	Token []tokenV3Entry `json:"token"`
	Unit  string         `json:"unit,omitempty"`
	Memo  string         `json:"memo,omitempty"`
}

type tokenV3Entry struct {
	Mint   string  `json:"mint"`
	Proofs []Proof `json:"proofs"`
}

// EncodeV3 encodes the token as cashuA: base64url of its JSON, unpadded.
func (t Token) EncodeV3() (string, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	v := tokenV3{Token: []tokenV3Entry{{Mint: t.Mint, Proofs: t.Proofs}}, Unit: t.Unit, Memo: t.Memo}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// JSON.stringify and Python's json.dumps leave <, > and & alone.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	return prefixV3 + base64.RawURLEncoding.EncodeToString(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

func decodeV3(s string) (Token, error) {
	raw, err := decodeBase64(s)
	if err != nil {
		return Token{}, fmt.Errorf("%w: cashuA payload is not base64", ErrToken)
	}
	var v tokenV3
	// The JSON error is dropped: a syntax error quotes the input.
	if json.Unmarshal(raw, &v) != nil {
		return Token{}, fmt.Errorf("%w: cashuA payload is not a V3 token's JSON", ErrToken)
	}
	if len(v.Token) == 0 {
		return Token{}, fmt.Errorf("%w: cashuA token has no entries", ErrToken)
	}
	t := Token{Mint: v.Token[0].Mint, Unit: v.Unit, Memo: v.Memo}
	for _, e := range v.Token {
		if e.Mint != t.Mint {
			return Token{}, fmt.Errorf("%w: cashuA tokens of several mints are not supported", ErrToken)
		}
		t.Proofs = append(t.Proofs, e.Proofs...)
	}
	if t.Unit == "" {
		// V3 tokens before units were all sats.
		t.Unit = "sat"
	}
	return t, nil
}
