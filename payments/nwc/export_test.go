package nwc

// Test access to the encryption helpers, to hand-craft requests.
var (
	EncryptForTest = encrypt
	DecryptForTest = decrypt
)
