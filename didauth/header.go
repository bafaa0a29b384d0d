package didauth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Scheme is the HTTP authorization scheme (NIP-2).
const Scheme = "DIDAuthV1"

// Domain separators: prefixed to the canonical signed_data before signing.
const (
	// SeparatorNIP10 is written in strict mode (seed 003, NIP-10 §3.2).
	SeparatorNIP10 = "MCP_NIP10_AUTH_V1:"
	// SeparatorNIP7 is the same separator after NIP-10 was renamed NIP-7:
	// accepted in strict mode, never written.
	SeparatorNIP7 = "MCP_NIP7_AUTH_V1:"
	// SeparatorKit is what @nuwa-ai/identity-kit 0.6.0 always uses:
	// written and accepted in compatibility mode only.
	SeparatorKit = "DIDAuthV1:"
)

// maxHeader bounds the Authorization header read: credentials are a few
// hundred bytes; a did:web with a long path and extra fields stays far
// below this.
const maxHeader = 8 << 10

// Credentials are the decoded contents of a DIDAuthV1 header.
type Credentials struct {
	// SignedData is the signed object as sent, byte for byte.
	SignedData json.RawMessage `json:"signed_data"`
	Signature  SignatureInfo   `json:"signature"`
}

// SignatureInfo names the signer and carries the signature.
type SignatureInfo struct {
	SignerDID string `json:"signer_did"`
	KeyID     string `json:"key_id"`
	// Value is the signature, multibase base64url ('u', no padding).
	Value string `json:"value"`
}

// ParseHeader decodes an Authorization header value. Errors are *Error
// with CodeMissing, CodeMalformed or CodeEncoding.
func ParseHeader(value string) (*Credentials, error) {
	if value == "" {
		return nil, fail(CodeMissing, "no Authorization header; sign the request with DIDAuthV1")
	}
	if len(value) > maxHeader {
		return nil, fail(CodeMalformed, "Authorization header longer than %d bytes", maxHeader)
	}
	scheme, cred, ok := strings.Cut(value, " ")
	if !ok || !strings.EqualFold(scheme, Scheme) {
		return nil, fail(CodeMalformed, "Authorization scheme is not %s: want \"%s u<base64url credentials>\"", Scheme, Scheme)
	}
	cred = strings.TrimSpace(cred)
	if !strings.HasPrefix(cred, "u") {
		return nil, fail(CodeEncoding, "credentials must be multibase base64url: a leading 'u', then base64url without padding")
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(cred[1:])
	if err != nil {
		return nil, &Error{Status: 401, Code: CodeEncoding, Message: "credentials are not base64url without padding: " + err.Error(), Err: err}
	}
	var c Credentials
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&c); err != nil || dec.More() {
		return nil, &Error{Status: 401, Code: CodeMalformed, Message: "credentials are not a JSON object {signed_data, signature}", Err: err}
	}
	switch {
	case len(c.SignedData) == 0 || c.SignedData[0] != '{':
		return nil, fail(CodeMalformed, "credentials lack the signed_data object")
	case c.Signature.SignerDID == "":
		return nil, fail(CodeMalformed, "credentials lack signature.signer_did")
	case c.Signature.KeyID == "":
		return nil, fail(CodeMalformed, "credentials lack signature.key_id")
	case c.Signature.Value == "":
		return nil, fail(CodeMalformed, "credentials lack signature.value")
	}
	return &c, nil
}

// signatureBytes decodes Signature.Value.
func (c *Credentials) signatureBytes() ([]byte, error) {
	v := c.Signature.Value
	if !strings.HasPrefix(v, "u") {
		return nil, fail(CodeEncoding, "signature.value must be multibase base64url (leading 'u')")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(v[1:])
	if err != nil {
		return nil, &Error{Status: 401, Code: CodeEncoding, Message: "signature.value is not base64url without padding", Err: err}
	}
	return b, nil
}

// Header encodes c as an Authorization header value: "DIDAuthV1 u…". The
// JSON keeps signed_data as it is and does not escape <, > and &, as
// JSON.stringify does not.
func (c *Credentials) Header() string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c) // only strings and raw JSON: cannot fail
	return Scheme + " u" + base64.RawURLEncoding.EncodeToString(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
