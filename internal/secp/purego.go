//go:build !libsecp256k1

package secp

import (
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"
)

// Backend names the implementation this binary was built with.
const Backend = "pure-go"

// Key is a secret key parsed once for signing.
type Key struct {
	priv *btcec.PrivateKey
}

// NewKey parses sk.
func NewKey(sk nostr.SecretKey) (*Key, error) {
	var s btcec.ModNScalar
	if overflow := s.SetBytes((*[32]byte)(&sk)); overflow != 0 || s.IsZero() {
		return nil, fmt.Errorf("%w: secret key is zero or not below the group order", ErrInvalidKey)
	}
	return &Key{priv: btcec.PrivKeyFromScalar(&s)}, nil
}

// Sign returns the BIP-340 signature of the 32-byte message id.
func (k *Key) Sign(id *[32]byte) ([64]byte, error) {
	sig, err := schnorr.Sign(k.priv, id[:], schnorr.FastSign())
	if err != nil {
		return [64]byte{}, err
	}
	return [64]byte(sig.Serialize()), nil
}

// ConversationKey returns NIP-44 v2's conversation key between sk and pub.
func ConversationKey(pub nostr.PubKey, sk nostr.SecretKey) ([32]byte, error) {
	ck, err := nip44.GenerateConversationKey(pub, sk)
	if err != nil {
		return ck, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return ck, nil
}
