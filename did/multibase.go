package did

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
)

// ErrEncoding is returned for multibase or base58 text that does not
// decode.
var ErrEncoding = errors.New("did: bad multibase encoding")

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Index = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		t[base58Alphabet[i]] = int8(i)
	}
	return t
}()

// maxBase58 bounds what DecodeBase58 reads: keys are at most ~50
// characters, and big-number decoding is quadratic in the length.
const maxBase58 = 256

// EncodeBase58 encodes b in Bitcoin's base58 alphabet (base58btc).
func EncodeBase58(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	n := new(big.Int).SetBytes(b)
	radix, mod := big.NewInt(58), new(big.Int)
	var out []byte
	for n.Sign() > 0 {
		n.DivMod(n, radix, mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for range zeros {
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// DecodeBase58 decodes base58btc text.
func DecodeBase58(s string) ([]byte, error) {
	if len(s) > maxBase58 {
		return nil, fmt.Errorf("%w: base58 longer than %d characters", ErrEncoding, maxBase58)
	}
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	n, radix := new(big.Int), big.NewInt(58)
	for i := 0; i < len(s); i++ {
		v := base58Index[s[i]]
		if v < 0 {
			return nil, fmt.Errorf("%w: %q is not a base58 character", ErrEncoding, s[i])
		}
		n.Mul(n, radix)
		n.Add(n, big.NewInt(int64(v)))
	}
	return append(make([]byte, zeros), n.Bytes()...), nil
}

// DecodeMultibase decodes multibase text in base58btc ('z') or base64url
// without padding ('u'), the two encodings DIDs and DIDAuthV1 use.
func DecodeMultibase(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrEncoding)
	}
	switch s[0] {
	case 'z':
		return DecodeBase58(s[1:])
	case 'u':
		b, err := base64.RawURLEncoding.Strict().DecodeString(s[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncoding, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%w: multibase prefix %q is neither z (base58btc) nor u (base64url)", ErrEncoding, s[0])
	}
}

// EncodeBase58Multibase returns 'z' + base58btc(b).
func EncodeBase58Multibase(b []byte) string { return "z" + EncodeBase58(b) }

// EncodeBase64URLMultibase returns 'u' + base64url(b) without padding.
func EncodeBase64URLMultibase(b []byte) string { return "u" + base64.RawURLEncoding.EncodeToString(b) }
