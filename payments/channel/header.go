package channel

import (
	"encoding/base64"
	"fmt"
)

// Header is NIP-4's HTTP header, on requests and answers alike.
const Header = "X-Payment-Channel-Data"

// maxHeader bounds a header value: a payload is a few hundred bytes; what
// is far longer is refused before it is decoded.
const maxHeader = 8 << 10

// EncodeHeader returns the header value of p: 'u' and the base64url (no
// padding) of its JSON.
func EncodeHeader(p *Payload) (string, error) {
	b, err := MarshalPayload(p)
	if err != nil {
		return "", err
	}
	return "u" + base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeHeader reads a header value EncodeHeader writes.
func DecodeHeader(v string) (Payload, error) {
	if len(v) > maxHeader {
		return Payload{}, fmt.Errorf("%w: %s of %d bytes, at most %d", ErrMalformed, Header, len(v), maxHeader)
	}
	if v == "" || v[0] != 'u' {
		return Payload{}, fmt.Errorf("%w: %s is not multibase base64url ('u…')", ErrMalformed, Header)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(v[1:])
	if err != nil {
		return Payload{}, fmt.Errorf("%w: %s: %v", ErrMalformed, Header, err)
	}
	return UnmarshalPayload(b)
}
