package nostrx

import (
	"fmt"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/secretfile"
)

var (
	// ErrKeyFileExists is returned by WriteKeyFile when the file exists and
	// overwriting was not asked for.
	ErrKeyFileExists = secretfile.ErrExists

	// ErrInsecureKeyFile is returned by ReadKeyFile when the file can be read
	// by users other than its owner.
	ErrInsecureKeyFile = secretfile.ErrInsecure
)

// maxKeyFile bounds what is read of a key file: one short line; anything
// much larger is not a key file.
const maxKeyFile = 512

// ReadKeyFile reads a secret key (nsec or hex) from path. The file must not be
// accessible to group or others: a secret that others could have read is not
// a secret, so it is refused rather than used.
func ReadKeyFile(path string) (nostr.SecretKey, error) {
	data, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return nostr.SecretKey{}, fmt.Errorf("read key file: %w", err)
	}
	sk, err := ParseSecretKey(strings.TrimSpace(string(data)))
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
	data := []byte(EncodeNsec(sk) + "\n")
	write := secretfile.Create
	if overwrite {
		write = secretfile.Replace
	}
	if err := write(path, data); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	return nil
}

// LoadOrCreateKeyFile reads the key at path, creating a new random key there
// first if the file does not exist. Long-running servers use it so that their
// identity survives restarts. created reports whether a key was generated.
func LoadOrCreateKeyFile(path string) (sk nostr.SecretKey, created bool, err error) {
	data, created, err := secretfile.LoadOrCreate(path, maxKeyFile, func() ([]byte, error) {
		return []byte(EncodeNsec(nostr.Generate()) + "\n"), nil
	})
	if err != nil {
		return nostr.SecretKey{}, false, fmt.Errorf("key file: %w", err)
	}
	sk, err = ParseSecretKey(strings.TrimSpace(string(data)))
	if err != nil {
		return nostr.SecretKey{}, false, fmt.Errorf("key file %s: %w", path, err)
	}
	return sk, created, nil
}
