package nwc

// Test access to the encryption helpers, to hand-craft requests.
var (
	EncryptForTest = encrypt
	DecryptForTest = decrypt
)

// ReadNotificationForTest checks one notification event, as the listener
// does.
var ReadNotificationForTest = readNotification
