package nostrx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"fiatjaf.com/nostr"
)

var (
	// ErrKeyFileExists is returned by WriteKeyFile when the file exists and
	// overwriting was not asked for.
	ErrKeyFileExists = errors.New("key file already exists")

	// ErrInsecureKeyFile is returned by ReadKeyFile when the file can be read
	// by users other than its owner.
	ErrInsecureKeyFile = errors.New("key file is readable by other users")
)

// ReadKeyFile reads a secret key (nsec or hex) from path. The file must not be
// accessible to group or others: a secret that others could have read is not
// a secret, so it is refused rather than used.
func ReadKeyFile(path string) (nostr.SecretKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nostr.SecretKey{}, fmt.Errorf("read key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nostr.SecretKey{}, fmt.Errorf("read key file: %w", err)
	}
	if info.IsDir() {
		return nostr.SecretKey{}, fmt.Errorf("read key file: %s is a directory", path)
	}
	if perm := info.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nostr.SecretKey{}, fmt.Errorf("%w: %s has mode %04o; fix it with: chmod 600 %s", ErrInsecureKeyFile, path, perm, path)
	}
	// A key file is one short line; anything much larger is not a key file.
	buf := make([]byte, 512)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nostr.SecretKey{}, fmt.Errorf("read key file %s: %w", path, err)
	}
	sk, err := ParseSecretKey(string(buf[:n]))
	if err != nil {
		return nostr.SecretKey{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return sk, nil
}

// WriteKeyFile writes sk as an nsec to path with mode 0600, creating parent
// directories with mode 0700. Without overwrite it refuses to replace an
// existing file and returns ErrKeyFileExists; the check and the creation are
// one atomic step, so two processes racing to create a key cannot both win.
func WriteKeyFile(path string, sk nostr.SecretKey, overwrite bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	data := []byte(EncodeNsec(sk) + "\n")
	if !overwrite {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrKeyFileExists, path)
		}
		if err != nil {
			return fmt.Errorf("write key file: %w", err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("write key file: %w", err)
		}
		return f.Close()
	}
	// Overwrite through a temporary file and a rename, so a crash never leaves
	// a half-written key behind.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write key file: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	return nil
}

// LoadOrCreateKeyFile reads the key at path, creating a new random key there
// first if the file does not exist. Long-running servers use it so that their
// identity survives restarts. created reports whether a key was generated.
func LoadOrCreateKeyFile(path string) (sk nostr.SecretKey, created bool, err error) {
	sk, err = ReadKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return sk, false, err
	}
	fresh := nostr.Generate()
	switch err := WriteKeyFile(path, fresh, false); {
	case errors.Is(err, ErrKeyFileExists):
		// Another process created it between our read and our write; use theirs.
		sk, err = ReadKeyFile(path)
		return sk, false, err
	case err != nil:
		return nostr.SecretKey{}, false, err
	}
	return fresh, true, nil
}
