package didauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cvmgo/cvm/did"
)

// Mode selects how signed_data is built and canonicalized, and the domain
// separator.
type Mode int

const (
	// Strict binds the request (Payload), canonicalizes by RFC 8785 and
	// writes SeparatorNIP10.
	Strict Mode = iota
	// Compat makes the headers of @nuwa-ai/identity-kit 0.6.0: its
	// canonicalization (KitCanonical) and SeparatorKit. See the package
	// documentation for what such a header does not protect.
	Compat
)

func (m Mode) String() string {
	if m == Compat {
		return "compat"
	}
	return "strict"
}

// Payload is strict mode's signed_data: every field is required, and the
// verifier checks each against the request it arrived with.
type Payload struct {
	// Audience is the server the request is for: its MCP endpoint URL
	// (scheme://host[:port]/path) or its DID.
	Audience string `json:"audience"`
	// BodySHA256 is the lowercase hex SHA-256 of the request body (the
	// JSON-RPC message; of nothing for GET and DELETE).
	BodySHA256 string `json:"body_sha256"`
	// Method is the HTTP method, uppercase.
	Method string `json:"method"`
	// Nonce is unique per request of a DID within the window: a random
	// UUID.
	Nonce string `json:"nonce"`
	// KeyID is the signature's key_id, repeated here so that the
	// signature covers it: signature.signer_did and key_id are outside
	// signed_data, and one key may be listed by several DIDs.
	KeyID string `json:"key_id"`
	// Path is the request's path and query, as URL.RequestURI writes it.
	Path string `json:"path"`
	// Timestamp is when the request was signed, in Unix seconds.
	Timestamp int64 `json:"timestamp"`
}

// BodyHash returns the BodySHA256 of body.
func BodyHash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// NewNonce returns a random version-4 UUID, the nonce form the kit uses.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// SignPayload returns the strict-mode Authorization header value for p;
// p.KeyID is set to the signer's.
func SignPayload(ctx context.Context, s did.Signer, p Payload) (string, error) {
	p.KeyID = s.KeyID()
	data, err := marshalNoEscape(p)
	if err != nil {
		return "", err
	}
	return Sign(ctx, s, data, Strict)
}

// Sign signs signedData (a JSON object, kept byte for byte in the header)
// in mode m and returns the Authorization header value.
func Sign(ctx context.Context, s did.Signer, signedData []byte, m Mode) (string, error) {
	sep, canon := SeparatorNIP10, Canonical
	if m == Compat {
		sep, canon = SeparatorKit, KitCanonical
	}
	c, err := canon(signedData)
	if err != nil {
		return "", err
	}
	sig, err := s.Sign(ctx, append([]byte(sep), c...))
	if err != nil {
		return "", fmt.Errorf("didauth: sign as %s: %w", s.DID(), err)
	}
	cred := Credentials{
		SignedData: signedData,
		Signature: SignatureInfo{
			SignerDID: s.DID(),
			KeyID:     s.KeyID(),
			Value:     did.EncodeBase64URLMultibase(sig),
		},
	}
	return cred.Header(), nil
}

// KitPayload returns signed_data as the kit's HTTP clients build it, its
// fields in the kit's order: {"operation":"http_request","params":{"method",
// "uri"},["audience",]"nonce","timestamp"}. An empty audience is left out.
// Only operation, audience, nonce and timestamp are covered by the kit's
// signature (see KitCanonical).
func KitPayload(method, uri, audience, nonce string, timestamp int64) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"operation":"http_request","params":{"method":`)
	kitString(&buf, method)
	buf.WriteString(`,"uri":`)
	kitString(&buf, uri)
	buf.WriteString(`}`)
	if audience != "" {
		buf.WriteString(`,"audience":`)
		kitString(&buf, audience)
	}
	buf.WriteString(`,"nonce":`)
	kitString(&buf, nonce)
	fmt.Fprintf(&buf, `,"timestamp":%d}`, timestamp)
	return buf.Bytes()
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
