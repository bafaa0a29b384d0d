package contextvm

import (
	"context"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

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
	sk   nostr.SecretKey
	pk   nostr.PubKey
	priv *btcec.PrivateKey
}

// NewKeySigner returns a KeySigner for sk.
func NewKeySigner(sk nostr.SecretKey) *KeySigner {
	priv, _ := btcec.PrivKeyFromBytes(sk[:])
	return &KeySigner{sk: sk, pk: sk.Public(), priv: priv}
}

// GetPublicKey returns the signer's public key.
func (k *KeySigner) GetPublicKey(context.Context) (nostr.PubKey, error) { return k.pk, nil }

// SignEvent sets evt's pubkey, id and signature. Unlike nostr.Event.Sign it
// keeps the parsed private key, which spares a scalar multiplication (a
// quarter of the cost of a signature) on every message.
func (k *KeySigner) SignEvent(_ context.Context, evt *nostr.Event) error {
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	evt.PubKey = k.pk
	evt.SetID()
	sig, err := schnorr.Sign(k.priv, evt.ID[:], schnorr.FastSign())
	if err != nil {
		return err
	}
	evt.Sig = [64]byte(sig.Serialize())
	return nil
}

// Decrypt opens a NIP-44 v2 payload from sender.
func (k *KeySigner) Decrypt(_ context.Context, ciphertext string, sender nostr.PubKey) (string, error) {
	ck, err := nip44.GenerateConversationKey(sender, k.sk)
	if err != nil {
		return "", err
	}
	return nip44.Decrypt(ciphertext, ck)
}
