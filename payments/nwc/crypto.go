package nwc

import (
	"fmt"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip04"
	"fiatjaf.com/nostr/nip44"
)

// encrypt encrypts plaintext from sk to peer with scheme (EncryptionNIP44
// or EncryptionNIP04).
func encrypt(scheme, plaintext string, sk nostr.SecretKey, peer nostr.PubKey) (string, error) {
	switch scheme {
	case EncryptionNIP44:
		key, err := nip44.GenerateConversationKey(peer, sk)
		if err != nil {
			return "", err
		}
		return nip44.Encrypt(plaintext, key)
	case EncryptionNIP04:
		key, err := nip04.ComputeSharedSecret(peer, sk)
		if err != nil {
			return "", err
		}
		return nip04.Encrypt(plaintext, key)
	}
	return "", fmt.Errorf("unsupported encryption %q", scheme)
}

func decrypt(scheme, ciphertext string, sk nostr.SecretKey, peer nostr.PubKey) (string, error) {
	if len(ciphertext) > 2*maxMessageBytes {
		return "", fmt.Errorf("ciphertext of %d bytes is too large", len(ciphertext))
	}
	switch scheme {
	case EncryptionNIP44:
		key, err := nip44.GenerateConversationKey(peer, sk)
		if err != nil {
			return "", err
		}
		return nip44.Decrypt(ciphertext, key)
	case EncryptionNIP04:
		key, err := nip04.ComputeSharedSecret(peer, sk)
		if err != nil {
			return "", err
		}
		return nip04.Decrypt(ciphertext, key)
	}
	return "", fmt.Errorf("unsupported encryption %q", scheme)
}

// requestEncryption returns the scheme of a request event: its encryption
// tag, NIP-04 when there is none.
func requestEncryption(evt nostr.Event) string {
	if t := evt.Tags.Find("encryption"); len(t) >= 2 {
		return t[1]
	}
	return EncryptionNIP04
}
