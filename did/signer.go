package did

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"fiatjaf.com/nostr"
	"github.com/btcsuite/btcd/btcec/v2"
	becdsa "github.com/btcsuite/btcd/btcec/v2/ecdsa"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"github.com/cvmgo/cvm/internal/secretfile"
)

// Signer signs as a DID: DIDAuthV1 signs requests with one. Sign is safe
// for concurrent use; DID and KeyID never change.
type Signer interface {
	// DID is the DID signed as.
	DID() string
	// KeyID is the verification method that verifies the signatures: a DID
	// URL under DID, authorized for authentication in its document.
	KeyID() string
	// Sign signs msg as the key's algorithm defines (see KeyType).
	Sign(ctx context.Context, msg []byte) ([]byte, error)
}

// KeySigner is a Signer holding a secret key in memory.
type KeySigner struct {
	pub   PublicKey
	did   string
	keyID string
	// ownKeyID is the key id of the key's own DID (did:key, did:nostr),
	// which key files need not record.
	ownKeyID string

	ed    ed25519.PrivateKey
	k1    *btcec.PrivateKey // Secp256k1 and Schnorr
	p256  *ecdsa.PrivateKey
	nostr nostr.SecretKey
}

// NostrSigner signs as did:nostr:<hex public key of sk> with BIP-340
// Schnorr: the identity of `cvm keygen`'s key, unchanged.
func NostrSigner(sk nostr.SecretKey) *KeySigner {
	priv, _ := btcec.PrivKeyFromBytes(sk[:])
	pk := sk.Public()
	d := NostrDID(pk)
	return &KeySigner{
		pub:      PublicKey{Type: Schnorr, Bytes: pk[:]},
		did:      d,
		keyID:    d + nostrFragment,
		ownKeyID: d + nostrFragment,
		k1:       priv,
		nostr:    sk,
	}
}

// NostrDID returns did:nostr:<hex of pk>.
func NostrDID(pk nostr.PubKey) string { return "did:nostr:" + pk.Hex() }

// NewKeySigner returns a did:key signer for a secret key of type t:
// Ed25519 a 32-byte seed, Secp256k1 and P256 a 32-byte scalar. Its key id
// is <did>#<multibase key>, the method id of did:key documents.
func NewKeySigner(t KeyType, secret []byte) (*KeySigner, error) {
	if len(secret) != 32 {
		return nil, fmt.Errorf("did: %s secret of %d bytes, want 32", t, len(secret))
	}
	s := &KeySigner{}
	switch t {
	case Ed25519:
		s.ed = ed25519.NewKeyFromSeed(secret)
		s.pub = PublicKey{Type: Ed25519, Bytes: []byte(s.ed.Public().(ed25519.PublicKey))}
	case Secp256k1:
		var n btcec.ModNScalar
		if n.SetByteSlice(secret) || n.IsZero() {
			return nil, errors.New("did: secp256k1 secret out of range")
		}
		s.k1, _ = btcec.PrivKeyFromBytes(secret)
		s.pub = PublicKey{Type: Secp256k1, Bytes: s.k1.PubKey().SerializeCompressed()}
	case P256:
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), secret)
		if err != nil {
			return nil, fmt.Errorf("did: P-256 secret: %w", err)
		}
		s.p256 = k
		s.pub = PublicKey{Type: P256, Bytes: elliptic.MarshalCompressed(elliptic.P256(), k.X, k.Y)}
	default:
		return nil, fmt.Errorf("did: cannot make a did:key for key type %q", t)
	}
	s.did = KeyDID(s.pub)
	s.keyID = s.did + "#" + s.did[len("did:key:"):]
	s.ownKeyID = s.keyID
	return s, nil
}

// GenerateKey returns a did:key signer for a new random key of type t.
func GenerateKey(t KeyType) (*KeySigner, error) {
	secret := make([]byte, 32)
	for {
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		s, err := NewKeySigner(t, secret)
		if err == nil || t == Ed25519 {
			return s, err
		}
		// A scalar out of range is about 2^-128 likely: draw again.
	}
}

// GenerateKeyFile writes a new random did:key of type t to path (mode
// 0600; an existing file is never replaced) and returns its signer: what
// a command that makes a --did-key file calls.
func GenerateKeyFile(path string, t KeyType) (*KeySigner, error) {
	s, err := GenerateKey(t)
	if err != nil {
		return nil, err
	}
	if err := WriteKeyFile(path, s, false); err != nil {
		return nil, err
	}
	return s, nil
}

// KeyDID returns the did:key of k (Ed25519, Secp256k1 or P256), with the
// standard multicodec prefixes.
func KeyDID(k PublicKey) string { return "did:key:" + EncodeBase58Multibase(k.multicodec()) }

// WithKeyID returns a copy of s that names keyID as its key: for a DID
// whose document lists the key under another id (Nuwa's #account-key, a
// did:web server's key). The key must be in that document.
func (s *KeySigner) WithKeyID(did, keyID string) *KeySigner {
	c := *s
	c.did, c.keyID = did, keyID
	return &c
}

// DID is the DID signed as.
func (s *KeySigner) DID() string { return s.did }

// KeyID is the verification method id of the key.
func (s *KeySigner) KeyID() string { return s.keyID }

// PublicKey is the signer's public key.
func (s *KeySigner) PublicKey() PublicKey { return s.pub }

// VerificationMethod is the key as a DID document lists it, with the id
// KeyID.
func (s *KeySigner) VerificationMethod() VerificationMethod {
	return VerificationMethod{
		ID:                 s.keyID,
		Type:               s.pub.vmType(),
		Controller:         s.did,
		PublicKeyMultibase: EncodeBase58Multibase(s.pub.Bytes),
	}
}

// Sign signs msg (see KeyType for what each algorithm signs).
func (s *KeySigner) Sign(_ context.Context, msg []byte) ([]byte, error) {
	switch s.pub.Type {
	case Ed25519:
		return ed25519.Sign(s.ed, msg), nil
	case Secp256k1:
		h := sha256.Sum256(msg)
		sig := becdsa.Sign(s.k1, h[:]) // RFC 6979, low S
		r, ss := sig.R(), sig.S()
		out := make([]byte, 64)
		r.PutBytesUnchecked(out[:32])
		ss.PutBytesUnchecked(out[32:])
		return out, nil
	case P256:
		h := sha256.Sum256(msg)
		r, ss, err := ecdsa.Sign(rand.Reader, s.p256, h[:])
		if err != nil {
			return nil, err
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		ss.FillBytes(out[32:])
		return out, nil
	case Schnorr:
		h := sha256.Sum256(msg)
		sig, err := schnorr.Sign(s.k1, h[:], schnorr.FastSign())
		if err != nil {
			return nil, err
		}
		return sig.Serialize(), nil
	}
	return nil, fmt.Errorf("did: signer has no key")
}

// keyFile is the JSON of a did:key file (see WriteKeyFile).
type keyFile struct {
	Type   KeyType `json:"type"`
	Secret string  `json:"secret"`
	DID    string  `json:"did,omitempty"`
	KeyID  string  `json:"key_id,omitempty"`
}

// maxKeyFile bounds what is read of a key file: one small JSON object.
const maxKeyFile = 4096

// ReadKeyFile reads a signer from a key file written by WriteKeyFile. The
// file must not be readable by group or others. A file whose did does not
// match its secret is refused.
func ReadKeyFile(path string) (*KeySigner, error) {
	data, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read DID key file: %w", err)
	}
	var f keyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("DID key file %s: not JSON {\"type\",\"secret\"}: %w", path, err)
	}
	secret, err := hex.DecodeString(f.Secret)
	if err != nil || len(secret) != 32 {
		return nil, fmt.Errorf("DID key file %s: secret must be 64 hex characters", path)
	}
	var s *KeySigner
	if f.Type == Schnorr {
		s = NostrSigner(nostr.SecretKey(secret))
	} else if s, err = NewKeySigner(f.Type, secret); err != nil {
		return nil, fmt.Errorf("DID key file %s: %w", path, err)
	}
	if f.DID != "" && f.DID != s.did && f.KeyID == "" {
		return nil, fmt.Errorf("DID key file %s: did %s is not the DID of its secret (%s)", path, f.DID, s.did)
	}
	if f.KeyID != "" {
		d := f.DID
		if d == "" {
			d = s.did
		}
		s = s.WithKeyID(d, f.KeyID)
	}
	return s, nil
}

// WriteKeyFile writes s to path, mode 0600, as JSON:
//
//	{"type":"ed25519"|"secp256k1"|"p256"|"schnorr","secret":"<64 hex>","did":"did:key:…","key_id":"…"}
//
// type and secret are required when reading; did, when present without
// key_id, must be the secret's own; key_id (with did) names another
// document's method for the same key (see WithKeyID). Without overwrite it
// refuses to replace a file.
func WriteKeyFile(path string, s *KeySigner, overwrite bool) error {
	var secret []byte
	switch s.pub.Type {
	case Ed25519:
		secret = s.ed.Seed()
	case Secp256k1:
		secret = s.k1.Serialize()
	case P256:
		b, err := s.p256.Bytes()
		if err != nil {
			return err
		}
		secret = b
	case Schnorr:
		secret = s.nostr[:]
	}
	f := keyFile{Type: s.pub.Type, Secret: hex.EncodeToString(secret), DID: s.did}
	if s.keyID != s.ownKeyID {
		f.KeyID = s.keyID
	}
	data, _ := json.Marshal(f)
	write := secretfile.Create
	if overwrite {
		write = secretfile.Replace
	}
	if err := write(path, append(data, '\n')); err != nil {
		return fmt.Errorf("write DID key file: %w", err)
	}
	return nil
}
