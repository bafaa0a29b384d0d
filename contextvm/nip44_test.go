package contextvm

import (
	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"
)

func nip44Key(sk nostr.SecretKey, pk nostr.PubKey) ([32]byte, error) {
	return nip44.GenerateConversationKey(pk, sk)
}

func nip44Encrypt(plaintext string, key [32]byte) (string, error) {
	return nip44.Encrypt(plaintext, key)
}
