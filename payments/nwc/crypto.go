package nwc

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"fiatjaf.com/nostr"
)

// decryptNIP04 reads a NIP-04 content, "base64(ciphertext)?iv=base64(iv)"
// with AES-256-CBC and PKCS#7 padding. It checks what the nostr library's
// nip04.Decrypt takes on trust: that library panics on an IV that is not
// 16 bytes or a ciphertext that is not whole blocks (found by FuzzDecrypt:
// one crafted request would have stopped a wallet service), and strips
// padding it never checks.
func decryptNIP04(content string, key []byte) (string, error) {
	data, ivText, ok := strings.Cut(content, "?iv=")
	if !ok || strings.Contains(ivText, "?iv=") {
		return "", errors.New("nip04: want base64(ciphertext)?iv=base64(iv)")
	}
	ciphertext, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return "", fmt.Errorf("nip04: ciphertext: %w", err)
	}
	iv, err := base64.StdEncoding.DecodeString(ivText)
	if err != nil {
		return "", fmt.Errorf("nip04: iv: %w", err)
	}
	if len(iv) != aes.BlockSize {
		return "", fmt.Errorf("nip04: iv of %d bytes, want %d", len(iv), aes.BlockSize)
	}
	if len(ciphertext) == 0 || len(ciphertext)%aes.BlockSize != 0 {
		return "", fmt.Errorf("nip04: ciphertext of %d bytes is not whole %d-byte blocks", len(ciphertext), aes.BlockSize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", fmt.Errorf("nip04: %w", err)
	}
	plain := make([]byte, len(ciphertext))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, ciphertext)
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > aes.BlockSize {
		return "", errors.New("nip04: bad padding (wrong key or corrupted content)")
	}
	for _, b := range plain[len(plain)-pad:] {
		if int(b) != pad {
			return "", errors.New("nip04: bad padding (wrong key or corrupted content)")
		}
	}
	return string(plain[:len(plain)-pad]), nil
}

// requestEncryption returns the scheme of a request event: its encryption
// tag, NIP-04 when there is none.
func requestEncryption(evt nostr.Event) string {
	if t := evt.Tags.Find("encryption"); len(t) >= 2 {
		return t[1]
	}
	return EncryptionNIP04
}
