package nwc

import (
	"fmt"
	"sync"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip04"
	"fiatjaf.com/nostr/nip44"
	"github.com/cvmgo/cvm/internal/secp"
)

// keys are one side's keys of a connection: its secret key and the other
// side's public key, which never change for the connection's life. Each
// shared secret is derived once, on first use, and the secret key parsed
// once for signing: an elliptic-curve multiplication costs a third of a
// millisecond in pure Go, and a paid call encrypts, decrypts and signs a
// dozen NWC messages between its client, its server and the wallet.
type keys struct {
	sk   nostr.SecretKey
	pub  nostr.PubKey // sk's
	peer nostr.PubKey

	nip44Once sync.Once
	nip44Key  [32]byte
	nip44Err  error

	nip04Once sync.Once
	nip04Key  []byte
	nip04Err  error

	signOnce sync.Once
	signer   *secp.Key
	signErr  error
}

func newKeys(sk nostr.SecretKey, peer nostr.PubKey) *keys {
	return &keys{sk: sk, pub: sk.Public(), peer: peer}
}

func (k *keys) conversationKey() ([32]byte, error) {
	k.nip44Once.Do(func() { k.nip44Key, k.nip44Err = secp.ConversationKey(k.peer, k.sk) })
	return k.nip44Key, k.nip44Err
}

func (k *keys) sharedSecret() ([]byte, error) {
	k.nip04Once.Do(func() { k.nip04Key, k.nip04Err = nip04.ComputeSharedSecret(k.peer, k.sk) })
	return k.nip04Key, k.nip04Err
}

// encrypt encrypts plaintext to the peer with scheme (EncryptionNIP44 or
// EncryptionNIP04).
func (k *keys) encrypt(scheme, plaintext string) (string, error) {
	switch scheme {
	case EncryptionNIP44:
		key, err := k.conversationKey()
		if err != nil {
			return "", err
		}
		return nip44.Encrypt(plaintext, key)
	case EncryptionNIP04:
		key, err := k.sharedSecret()
		if err != nil {
			return "", err
		}
		return nip04.Encrypt(plaintext, key)
	}
	return "", fmt.Errorf("unsupported encryption %q", scheme)
}

// decrypt opens ciphertext from the peer, encrypted with scheme.
func (k *keys) decrypt(scheme, ciphertext string) (string, error) {
	if len(ciphertext) > 2*maxMessageBytes {
		return "", fmt.Errorf("ciphertext of %d bytes is too large", len(ciphertext))
	}
	switch scheme {
	case EncryptionNIP44:
		key, err := k.conversationKey()
		if err != nil {
			return "", err
		}
		return nip44.Decrypt(ciphertext, key)
	case EncryptionNIP04:
		key, err := k.sharedSecret()
		if err != nil {
			return "", err
		}
		return decryptNIP04(ciphertext, key)
	}
	return "", fmt.Errorf("unsupported encryption %q", scheme)
}

// sign sets evt's pubkey, id and signature, as nostr.Event.Sign does.
func (k *keys) sign(evt *nostr.Event) error {
	k.signOnce.Do(func() { k.signer, k.signErr = secp.NewKey(k.sk) })
	if k.signErr != nil {
		return k.signErr
	}
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	evt.PubKey = k.pub
	evt.SetID()
	sig, err := k.signer.Sign((*[32]byte)(&evt.ID))
	if err != nil {
		return err
	}
	evt.Sig = sig
	return nil
}
