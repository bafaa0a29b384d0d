package room

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cvmgo/cvm/internal/secretfile"
)

// Key file names inside a room data directory.
const (
	EdKeyFile = "room-ed25519.key"
	HSKeyFile = "room-hs256.key"
)

// LoadOrCreateKeys reads the token keys in dir, creating each that is
// missing. A key file is created exclusively and completely or not at all:
// it is written to a temporary file and hard-linked into place, which fails
// if the name exists. So "cvm room token" and a running "cvm room serve"
// can race to create the keys and still agree on them, and a reader never
// sees a half-written key.
func LoadOrCreateKeys(dir string) (*Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mcpx: key directory: %w", err)
	}
	edPath := filepath.Join(dir, EdKeyFile)
	edPEM, err := loadOrCreate(edPath, func() ([]byte, error) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
	})
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(edPEM)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("mcpx: %s: not a PEM private key", edPath)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("mcpx: %s: %w", edPath, err)
	}
	ed, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("mcpx: %s: not an Ed25519 key", edPath)
	}

	hsPath := filepath.Join(dir, HSKeyFile)
	hsText, err := loadOrCreate(hsPath, func() ([]byte, error) {
		secret := make([]byte, 32)
		rand.Read(secret)
		return []byte(base64.StdEncoding.EncodeToString(secret) + "\n"), nil
	})
	if err != nil {
		return nil, err
	}
	hs, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(hsText)))
	if err != nil {
		return nil, fmt.Errorf("mcpx: %s: not base64: %w", hsPath, err)
	}
	return NewKeys(ed, hs)
}

// maxKeyFile bounds what is read of a key file.
const maxKeyFile = 8 << 10

// loadOrCreate returns the contents of path, creating it from generate if
// it does not exist. An existing file readable by group or others is
// refused.
func loadOrCreate(path string, generate func() ([]byte, error)) ([]byte, error) {
	data, _, err := secretfile.LoadOrCreate(path, maxKeyFile, generate)
	if err != nil {
		return nil, fmt.Errorf("mcpx room: key file: %w", err)
	}
	return data, nil
}
