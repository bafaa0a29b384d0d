package contextvm

import (
	"context"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"

	"github.com/cvmgo/cvm/internal/secp"
)

// Signer is the identity a client or server acts as: it signs events and
// opens NIP-44 payloads addressed to it. A nostr.Keyer (a remote signer, for
// instance) is one; KeySigner is the in-memory one.
type Signer interface {
	nostr.Signer
	Decrypter
}

// KeySigner is a Signer holding a secret key in memory. Unlike
// keyer.KeySigner it does not cache conversation keys: every gift wrap comes
// from a fresh random key, so a cache would only grow.
type KeySigner struct {
	sk  nostr.SecretKey
	pk  nostr.PubKey
	key *secp.Key
	err error // why sk cannot sign, if it cannot
}

// NewKeySigner returns a KeySigner for sk. A secret key that is zero or not
// below the group order gets a signer whose SignEvent returns the error.
func NewKeySigner(sk nostr.SecretKey) *KeySigner {
	key, err := secp.NewKey(sk)
	return &KeySigner{sk: sk, pk: sk.Public(), key: key, err: err}
}

// GetPublicKey returns the signer's public key.
func (k *KeySigner) GetPublicKey(context.Context) (nostr.PubKey, error) { return k.pk, nil }

// SignEvent sets evt's pubkey, id and signature. Unlike nostr.Event.Sign it
// keeps the parsed private key, which spares a scalar multiplication (a
// quarter of the cost of a signature) on every message, and it signs with
// the backend the binary was built with (libsecp256k1 under the build tag
// of that name, see package secp).
func (k *KeySigner) SignEvent(_ context.Context, evt *nostr.Event) error {
	if k.err != nil {
		return k.err
	}
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	evt.PubKey = k.pk
	evt.SetID()
	sig, err := k.key.Sign((*[32]byte)(&evt.ID))
	if err != nil {
		return err
	}
	evt.Sig = sig
	return nil
}

// Decrypt opens a NIP-44 v2 payload from sender.
func (k *KeySigner) Decrypt(_ context.Context, ciphertext string, sender nostr.PubKey) (string, error) {
	ck, err := secp.ConversationKey(sender, k.sk)
	if err != nil {
		return "", err
	}
	return nip44.Decrypt(ciphertext, ck)
}
