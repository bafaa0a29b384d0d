package room

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// loadOrCreate returns the contents of path, creating it from make if it
// does not exist. An existing file readable by group or others is refused.
func loadOrCreate(path string, generate func() ([]byte, error)) ([]byte, error) {
	data, err := readPrivate(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	data, err = generate()
	if err != nil {
		return nil, err
	}
	if err := createExclusive(path, data); err != nil {
		if errors.Is(err, ErrKeyExists) {
			// Someone else created it first: theirs wins.
			return readPrivate(path)
		}
		return nil, err
	}
	return data, nil
}

func readPrivate(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("mcpx: key file %s is readable by others (mode %v); run: chmod 600 %s", path, info.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcpx: read key: %w", err)
	}
	return data, nil
}

// createExclusive writes data to path with mode 0600 unless path exists
// (then the error matches ErrKeyExists).
func createExclusive(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("mcpx: create key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("mcpx: create key: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("mcpx: write key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("mcpx: write key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mcpx: write key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrKeyExists, path)
		}
		return fmt.Errorf("mcpx: create key: %w", err)
	}
	return nil
}
