package contextvm

import (
	"context"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"
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
	sk nostr.SecretKey
	pk nostr.PubKey
}

// NewKeySigner returns a KeySigner for sk.
func NewKeySigner(sk nostr.SecretKey) *KeySigner { return &KeySigner{sk: sk, pk: sk.Public()} }

// GetPublicKey returns the signer's public key.
func (k *KeySigner) GetPublicKey(context.Context) (nostr.PubKey, error) { return k.pk, nil }

// SignEvent sets evt's pubkey, id and signature.
func (k *KeySigner) SignEvent(_ context.Context, evt *nostr.Event) error { return evt.Sign(k.sk) }

// Decrypt opens a NIP-44 v2 payload from sender.
func (k *KeySigner) Decrypt(_ context.Context, ciphertext string, sender nostr.PubKey) (string, error) {
	ck, err := nip44.GenerateConversationKey(sender, k.sk)
	if err != nil {
		return "", err
	}
	return nip44.Decrypt(ciphertext, ck)
}
