package room

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cvmgo/cvm/mcpx"
)

// Token algorithms. EdDSA (Ed25519) is the default; HS256 is accepted for
// deployments that share a secret with another issuer.
const (
	AlgEdDSA = "EdDSA"
	AlgHS256 = "HS256"
)

// clockSkew is how far exp and nbf may be off before a token is refused.
// Tokens are minted on the gateway's own machine or a peer's; a few seconds
// of skew between hosts must not lock participants out.
const clockSkew = 30 * time.Second

// maxTokenBytes bounds what the verifier parses; real tokens are ~400 bytes.
const maxTokenBytes = 8 << 10

// Claims are what a room token says: who the participant is and which
// topics it may join.
type Claims struct {
	Issuer    string   `json:"iss,omitempty"`
	Subject   string   `json:"sub"` // the participant id
	Audience  Audience `json:"aud"` // the topics the token admits to
	ExpiresAt int64    `json:"exp"`
	NotBefore int64    `json:"nbf,omitempty"`
	IssuedAt  int64    `json:"iat,omitempty"`
	ID        string   `json:"jti,omitempty"`
	// Display metadata announced in presence.
	Name       string `json:"name,omitempty"`
	Kind       string `json:"kind,omitempty"` // human, agent or robot
	MCPVersion string `json:"mcp_version,omitempty"`
}

// Audience is the aud claim: one topic or a list (RFC 7519 allows both).
type Audience []string

// UnmarshalJSON accepts a string or an array of strings.
func (a *Audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = Audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud must be a string or an array of strings")
	}
	*a = many
	return nil
}

// MarshalJSON writes a single topic as a string, as most issuers do.
func (a Audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

// Allows reports whether the token admits its holder to topic.
func (c *Claims) Allows(topic string) bool {
	for _, t := range c.Audience {
		if t == topic {
			return true
		}
	}
	return false
}

// Participant is the presence record the claims describe.
func (c *Claims) Participant() mcpx.Participant {
	p := mcpx.Participant{ID: c.Subject, Name: c.Name, Kind: c.Kind, MCP: mcpx.MCPInfo{Version: c.MCPVersion}}
	if p.Name == "" {
		p.Name = p.ID
	}
	if p.Kind == "" {
		p.Kind = mcpx.ParticipantAgent
	}
	if p.MCP.Version == "" {
		p.MCP.Version = mcpx.DefaultMCPVersion
	}
	return p
}

// validate checks the claims a gateway relies on, at time now.
func (c *Claims) validate(now time.Time) error {
	if err := mcpx.ValidateParticipantID(c.Subject); err != nil {
		return fmt.Errorf("%w: sub: %v", ErrTokenInvalid, err)
	}
	if len(c.Audience) == 0 {
		return fmt.Errorf("%w: aud names no topic", ErrTokenInvalid)
	}
	switch c.Kind {
	case "", mcpx.ParticipantHuman, mcpx.ParticipantAgent, mcpx.ParticipantRobot:
	default:
		return fmt.Errorf("%w: kind %q is not human, agent or robot", ErrTokenInvalid, c.Kind)
	}
	if c.ExpiresAt == 0 {
		return fmt.Errorf("%w: exp is missing; tokens must expire", ErrTokenInvalid)
	}
	if now.After(time.Unix(c.ExpiresAt, 0).Add(clockSkew)) {
		return fmt.Errorf("%w at %s", ErrTokenExpired, time.Unix(c.ExpiresAt, 0).UTC().Format(time.RFC3339))
	}
	if c.NotBefore != 0 && now.Add(clockSkew).Before(time.Unix(c.NotBefore, 0)) {
		return fmt.Errorf("%w: not valid before %s", ErrTokenInvalid, time.Unix(c.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// Keys sign and verify room tokens (JWS compact serialization, RFC 7515).
// Either key may be absent; a token whose alg has no key is refused. The
// algorithm is pinned by the key, never chosen by the token: "none" and
// every alg other than EdDSA and HS256 are refused.
//
// Keys is immutable after construction and safe for concurrent use.
type Keys struct {
	ed    ed25519.PrivateKey
	edKID string
	hs    []byte
	hsKID string
}

// NewKeys returns Keys for an Ed25519 private key and an HMAC secret; either
// may be nil.
func NewKeys(ed ed25519.PrivateKey, hs256 []byte) (*Keys, error) {
	k := &Keys{}
	if ed != nil {
		if len(ed) != ed25519.PrivateKeySize {
			return nil, errors.New("mcpx: Ed25519 private key has the wrong size")
		}
		k.ed = ed
		k.edKID = keyID("ed25519", ed.Public().(ed25519.PublicKey))
	}
	if hs256 != nil {
		if len(hs256) < 32 {
			return nil, errors.New("mcpx: HS256 secret must be at least 32 bytes")
		}
		k.hs = bytes.Clone(hs256)
		k.hsKID = keyID("hs256", hs256)
	}
	if k.ed == nil && k.hs == nil {
		return nil, errors.New("mcpx: no token key")
	}
	return k, nil
}

// keyID names a key without revealing it: a truncated SHA-256.
func keyID(label string, key []byte) string {
	h := sha256.Sum256(append([]byte(label+":"), key...))
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

type jwsHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ,omitempty"`
	KID string `json:"kid,omitempty"`
}

// Sign returns a compact JWS of c signed with alg. It validates the claims
// first, so a token it returns is one the gateway accepts until it expires.
func (k *Keys) Sign(c Claims, alg string) (string, error) {
	if err := c.validate(time.Now()); err != nil {
		return "", err
	}
	if c.ID == "" {
		var b [12]byte
		rand.Read(b[:])
		c.ID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	h := jwsHeader{Alg: alg, Typ: "JWT"}
	switch alg {
	case AlgEdDSA:
		if k.ed == nil {
			return "", errors.New("mcpx: no Ed25519 key to sign with")
		}
		h.KID = k.edKID
	case AlgHS256:
		if k.hs == nil {
			return "", errors.New("mcpx: no HS256 secret to sign with")
		}
		h.KID = k.hsKID
	default:
		return "", fmt.Errorf("mcpx: unsupported token algorithm %q (want %s or %s)", alg, AlgEdDSA, AlgHS256)
	}
	hb, _ := json.Marshal(h)
	cb, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(hb) + "." + enc.EncodeToString(cb)
	var sig []byte
	if alg == AlgEdDSA {
		sig = ed25519.Sign(k.ed, []byte(signing))
	} else {
		m := hmac.New(sha256.New, k.hs)
		m.Write([]byte(signing))
		sig = m.Sum(nil)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// Verify checks token's signature, algorithm and time claims at now and
// returns its claims. It does not check the audience: the caller knows the
// topic (Claims.Allows). Every error matches ErrTokenInvalid.
func (k *Keys) Verify(token string, now time.Time) (*Claims, error) {
	if len(token) > maxTokenBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrTokenInvalid, maxTokenBytes)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not a compact JWS (want header.payload.signature)", ErrTokenInvalid)
	}
	enc := base64.RawURLEncoding
	hb, err1 := enc.DecodeString(parts[0])
	cb, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("%w: bad base64url: %v", ErrTokenInvalid, err)
	}
	var h jwsHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrTokenInvalid, err)
	}
	signing := []byte(token[:len(parts[0])+1+len(parts[1])])
	switch h.Alg {
	case AlgEdDSA:
		if k.ed == nil {
			return nil, fmt.Errorf("%w: EdDSA tokens are not accepted here", ErrTokenInvalid)
		}
		if h.KID != "" && h.KID != k.edKID {
			return nil, fmt.Errorf("%w: signed by another key (kid %q)", ErrTokenInvalid, h.KID)
		}
		if !ed25519.Verify(k.ed.Public().(ed25519.PublicKey), signing, sig) {
			return nil, fmt.Errorf("%w: bad signature", ErrTokenInvalid)
		}
	case AlgHS256:
		if k.hs == nil {
			return nil, fmt.Errorf("%w: HS256 tokens are not accepted here", ErrTokenInvalid)
		}
		if h.KID != "" && h.KID != k.hsKID {
			return nil, fmt.Errorf("%w: signed by another key (kid %q)", ErrTokenInvalid, h.KID)
		}
		m := hmac.New(sha256.New, k.hs)
		m.Write(signing)
		if subtle.ConstantTimeCompare(m.Sum(nil), sig) != 1 {
			return nil, fmt.Errorf("%w: bad signature", ErrTokenInvalid)
		}
	default:
		return nil, fmt.Errorf("%w: algorithm %q is not accepted (want %s or %s)", ErrTokenInvalid, h.Alg, AlgEdDSA, AlgHS256)
	}
	var c Claims
	if err := json.Unmarshal(cb, &c); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrTokenInvalid, err)
	}
	if err := c.validate(now); err != nil {
		return nil, err
	}
	return &c, nil
}
