package nwc

import "fiatjaf.com/nostr"

// EncryptForTest and DecryptForTest give tests the encryption of a
// connection between sk and peer, to hand-craft requests.
func EncryptForTest(scheme, plaintext string, sk nostr.SecretKey, peer nostr.PubKey) (string, error) {
	return newKeys(sk, peer).encrypt(scheme, plaintext)
}

func DecryptForTest(scheme, ciphertext string, sk nostr.SecretKey, peer nostr.PubKey) (string, error) {
	return newKeys(sk, peer).decrypt(scheme, ciphertext)
}

// ReadNotificationForTest checks one notification event, as the listener
// does.
func ReadNotificationForTest(evt nostr.Event, scheme string, wallet nostr.PubKey, sk nostr.SecretKey) (Transaction, error) {
	return readNotification(evt, scheme, newKeys(sk, wallet))
}
