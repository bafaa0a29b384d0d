package did

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"

	"github.com/btcsuite/btcd/btcec/v2"
	becdsa "github.com/btcsuite/btcd/btcec/v2/ecdsa"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// ErrBadSignature is returned by PublicKey.Verify for a signature that
// does not verify.
var ErrBadSignature = errors.New("did: signature does not verify")

// ErrBadKey is returned for public key material that does not decode to a
// key of its stated type.
var ErrBadKey = errors.New("did: bad public key")

// KeyType is a signature algorithm with its key type.
type KeyType string

// The key types. Each signs the message bytes as its algorithm defines:
//   - Ed25519: RFC 8032 over the message itself; 64-byte signature.
//   - Secp256k1: ECDSA over sha256(message), 64-byte r‖s, low S (as
//     @nuwa-ai/identity-kit signs and verifies).
//   - P256: ECDSA-SHA256, 64-byte r‖s (IEEE P1363, as WebCrypto).
//   - Schnorr: BIP-340 over sha256(message), 64 bytes (did:nostr).
const (
	Ed25519   KeyType = "ed25519"
	Secp256k1 KeyType = "secp256k1"
	P256      KeyType = "p256"
	Schnorr   KeyType = "schnorr"
)

// Multicodec prefixes of did:key identifiers and Multikey values.
var (
	prefixEd25519   = []byte{0xed, 0x01}
	prefixSecp256k1 = []byte{0xe7, 0x01}
	prefixP256      = []byte{0x80, 0x24}
	// prefixP256Kit is what @nuwa-ai/identity-kit 0.6.0 writes for P-256:
	// the code 0x1200 as two plain bytes instead of its varint (0x80 0x24).
	prefixP256Kit = []byte{0x12, 0x00}
)

// PublicKey is a public key with its algorithm.
type PublicKey struct {
	Type KeyType
	// Bytes: Ed25519 32 bytes; Secp256k1 and P256 33-byte compressed
	// points; Schnorr the 32-byte x coordinate.
	Bytes []byte
}

// Equal reports whether k and o are the same key.
func (k PublicKey) Equal(o PublicKey) bool { return k.Type == o.Type && bytes.Equal(k.Bytes, o.Bytes) }

// Verify checks sig over msg. It returns nil or an error wrapping
// ErrBadSignature or ErrBadKey.
func (k PublicKey) Verify(msg, sig []byte) error {
	if len(sig) != 64 {
		return fmt.Errorf("%w: %d bytes, want 64", ErrBadSignature, len(sig))
	}
	switch k.Type {
	case Ed25519:
		if len(k.Bytes) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: Ed25519 key of %d bytes", ErrBadKey, len(k.Bytes))
		}
		if !ed25519.Verify(ed25519.PublicKey(k.Bytes), msg, sig) {
			return ErrBadSignature
		}
		return nil
	case Secp256k1:
		pub, err := btcec.ParsePubKey(k.Bytes)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadKey, err)
		}
		var r, s btcec.ModNScalar
		if r.SetByteSlice(sig[:32]) || s.SetByteSlice(sig[32:]) || r.IsZero() || s.IsZero() || s.IsOverHalfOrder() {
			return fmt.Errorf("%w: r or s out of range, or high S", ErrBadSignature)
		}
		h := sha256.Sum256(msg)
		if !becdsa.NewSignature(&r, &s).Verify(h[:], pub) {
			return ErrBadSignature
		}
		return nil
	case P256:
		x, y := elliptic.UnmarshalCompressed(elliptic.P256(), k.Bytes)
		if x == nil {
			return fmt.Errorf("%w: not a compressed P-256 point", ErrBadKey)
		}
		pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}
		h := sha256.Sum256(msg)
		if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return ErrBadSignature
		}
		return nil
	case Schnorr:
		pub, err := schnorr.ParsePubKey(k.Bytes)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadKey, err)
		}
		s, err := schnorr.ParseSignature(sig)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		h := sha256.Sum256(msg)
		if !s.Verify(h[:], pub) {
			return ErrBadSignature
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown key type %q", ErrBadKey, k.Type)
	}
}

// multicodec returns the key with its standard multicodec prefix, as
// did:key and Multikey write it; Schnorr keys have none.
func (k PublicKey) multicodec() []byte {
	var p []byte
	switch k.Type {
	case Ed25519:
		p = prefixEd25519
	case Secp256k1:
		p = prefixSecp256k1
	case P256:
		p = prefixP256
	}
	return append(append([]byte(nil), p...), k.Bytes...)
}

// decodeMulticodec reads a multicodec-prefixed key (did:key, Multikey).
func decodeMulticodec(b []byte) (PublicKey, error) {
	var k PublicKey
	switch {
	case bytes.HasPrefix(b, prefixEd25519):
		k = PublicKey{Type: Ed25519, Bytes: b[2:]}
	case bytes.HasPrefix(b, prefixSecp256k1):
		k = PublicKey{Type: Secp256k1, Bytes: b[2:]}
	case bytes.HasPrefix(b, prefixP256), bytes.HasPrefix(b, prefixP256Kit):
		k = PublicKey{Type: P256, Bytes: b[2:]}
	default:
		return PublicKey{}, fmt.Errorf("%w: unknown multicodec prefix", ErrBadKey)
	}
	return k, k.check()
}

// check verifies the key's bytes are a point of its curve.
func (k PublicKey) check() error {
	switch k.Type {
	case Ed25519:
		if len(k.Bytes) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: Ed25519 key of %d bytes", ErrBadKey, len(k.Bytes))
		}
	case Secp256k1:
		if len(k.Bytes) != 33 {
			return fmt.Errorf("%w: secp256k1 key of %d bytes, want 33 (compressed)", ErrBadKey, len(k.Bytes))
		}
		if _, err := btcec.ParsePubKey(k.Bytes); err != nil {
			return fmt.Errorf("%w: %v", ErrBadKey, err)
		}
	case P256:
		if x, _ := elliptic.UnmarshalCompressed(elliptic.P256(), k.Bytes); x == nil {
			return fmt.Errorf("%w: not a compressed P-256 point", ErrBadKey)
		}
	case Schnorr:
		if _, err := schnorr.ParsePubKey(k.Bytes); err != nil {
			return fmt.Errorf("%w: %v", ErrBadKey, err)
		}
	default:
		return fmt.Errorf("%w: unknown key type %q", ErrBadKey, k.Type)
	}
	return nil
}

// vmType is the verification method type written for the key.
func (k PublicKey) vmType() string {
	switch k.Type {
	case Ed25519:
		return TypeEd25519
	case Secp256k1:
		return TypeSecp256k1
	case P256:
		return TypeP256
	default:
		return TypeSchnorr
	}
}

// PublicKey decodes the method's key. publicKeyMultibase is read both as
// Nuwa writes it (the raw key, its type given by the method type) and as
// W3C Multikey does (multicodec-prefixed); publicKeyJwk is read for
// Ed25519, P-256 and secp256k1.
func (vm VerificationMethod) PublicKey() (PublicKey, error) {
	if vm.PublicKeyMultibase != "" {
		b, err := DecodeMultibase(vm.PublicKeyMultibase)
		if err != nil {
			return PublicKey{}, fmt.Errorf("%w: %s: %v", ErrBadKey, vm.ID, err)
		}
		var k PublicKey
		switch vm.Type {
		case TypeEd25519, TypeEd25519v1:
			k = PublicKey{Type: Ed25519, Bytes: b}
			if len(b) == 34 && bytes.HasPrefix(b, prefixEd25519) {
				k.Bytes = b[2:]
			}
		case TypeSecp256k1:
			k = PublicKey{Type: Secp256k1, Bytes: b}
			if len(b) == 35 && bytes.HasPrefix(b, prefixSecp256k1) {
				k.Bytes = b[2:]
			}
		case TypeP256:
			k = PublicKey{Type: P256, Bytes: b}
			if len(b) == 35 && (bytes.HasPrefix(b, prefixP256) || bytes.HasPrefix(b, prefixP256Kit)) {
				k.Bytes = b[2:]
			}
		case TypeSchnorr:
			k = PublicKey{Type: Schnorr, Bytes: b}
		case TypeMultikey:
			return decodeMulticodec(b)
		default:
			return PublicKey{}, fmt.Errorf("%w: %s: unsupported method type %q", ErrBadKey, vm.ID, vm.Type)
		}
		return k, k.check()
	}
	if j := vm.PublicKeyJwk; j != nil {
		return j.publicKey()
	}
	return PublicKey{}, fmt.Errorf("%w: %s has no publicKeyMultibase or publicKeyJwk", ErrBadKey, vm.ID)
}

func (j *JWK) publicKey() (PublicKey, error) {
	x, err := base64.RawURLEncoding.DecodeString(j.X)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: JWK x: %v", ErrBadKey, err)
	}
	switch {
	case j.Kty == "OKP" && j.Crv == "Ed25519":
		k := PublicKey{Type: Ed25519, Bytes: x}
		return k, k.check()
	case j.Kty == "EC" && (j.Crv == "P-256" || j.Crv == "secp256k1"):
		y, err := base64.RawURLEncoding.DecodeString(j.Y)
		if err != nil || len(x) != 32 || len(y) != 32 {
			return PublicKey{}, fmt.Errorf("%w: JWK coordinates are not 32 bytes each", ErrBadKey)
		}
		c := append([]byte{0x02 | y[31]&1}, x...)
		k := PublicKey{Type: P256, Bytes: c}
		if j.Crv == "secp256k1" {
			k.Type = Secp256k1
		}
		return k, k.check()
	default:
		return PublicKey{}, fmt.Errorf("%w: JWK kty %q crv %q not supported", ErrBadKey, j.Kty, j.Crv)
	}
}
