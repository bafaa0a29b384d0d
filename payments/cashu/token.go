package cashu

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrToken reports a token that cannot be decoded or encoded. Its messages
// say what is wrong where, never what the token holds.
var ErrToken = errors.New("cashu: malformed token")

// Token prefixes (NUT-00): "cashu", then the version letter.
const (
	prefixV3 = "cashuA"
	prefixV4 = "cashuB"
)

// MaxTokenLen bounds an encoded token accepted from outside, prefix
// included. 128 KiB holds some 800 proofs with DLEQ proofs, far more than
// a payment needs (a sum of n sats takes at most 64 proofs); a longer
// string is refused before it is decoded.
const MaxTokenLen = 128 << 10

// Token is a set of proofs from one mint in one unit (the V4 shape; a V3
// token naming several mints is refused on decoding). It is a bearer
// secret: see redact.go.
type Token struct {
	Mint   string
	Unit   string
	Memo   string
	Proofs []Proof
}

// Amount is the sum of the token's proofs, and false on overflow.
func (t Token) Amount() (uint64, bool) { return SumProofs(t.Proofs) }

// DecodeToken decodes a cashuB (V4, CBOR) or cashuA (V3, JSON) token,
// with or without padding, in the URL-safe or the standard alphabet.
func DecodeToken(s string) (Token, error) {
	if len(s) > MaxTokenLen {
		return Token{}, fmt.Errorf("%w: %d characters, more than the %d accepted", ErrToken, len(s), MaxTokenLen)
	}
	var t Token
	var err error
	switch {
	case strings.HasPrefix(s, prefixV4):
		t, err = decodeV4(s[len(prefixV4):])
	case strings.HasPrefix(s, prefixV3):
		t, err = decodeV3(s[len(prefixV3):])
	default:
		return Token{}, fmt.Errorf("%w: not a cashuA or cashuB token", ErrToken)
	}
	if err != nil {
		return Token{}, err
	}
	if err := t.check(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// check is what a decoded token must satisfy whatever its version.
func (t Token) check() error {
	if t.Mint == "" {
		return fmt.Errorf("%w: no mint", ErrToken)
	}
	if len(t.Proofs) == 0 {
		return fmt.Errorf("%w: no proofs", ErrToken)
	}
	for i, p := range t.Proofs {
		if p.Secret == "" || p.C == "" || p.ID == "" {
			return fmt.Errorf("%w: proof %d lacks its secret, signature or keyset id", ErrToken, i)
		}
	}
	if _, ok := t.Amount(); !ok {
		return fmt.Errorf("%w: amounts overflow", ErrToken)
	}
	return nil
}

// decodeBase64 reads base64 in either alphabet, padded or not: NUT-00
// says URL-safe, but tokens and requests in the standard one circulate.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	return base64.RawStdEncoding.DecodeString(s)
}
