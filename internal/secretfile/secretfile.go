// Package secretfile reads and writes the files that hold secrets (keys,
// and later wallet connection URIs and tokens): one home for the rules
// every such file follows. A secret file is readable by its owner only
// (mode 0600, in a directory created 0700); one that group or others could
// read is refused, since a secret others could have read is not a secret. A
// file is written completely or not at all, and creating one is exclusive,
// so two processes racing to create the same key agree on one.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

var (
	// ErrExists is returned by Create when the file exists.
	ErrExists = errors.New("secret file already exists")
	// ErrInsecure is returned by Read for a file that users other than its
	// owner can read.
	ErrInsecure = errors.New("secret file is readable by other users")
)

// Read returns the contents of the secret file at path, at most limit
// bytes of it (a secret file is small; anything larger is not one). A file
// readable by group or others is refused with an error that matches
// ErrInsecure and says how to fix it; a missing file matches
// fs.ErrNotExist.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	if perm := info.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; fix it with: chmod 600 %s", ErrInsecure, path, perm, path)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// Create writes data to a new file at path, mode 0600, creating the parent
// directories (0700). It fails with an error matching ErrExists if path
// exists. The file is written under a temporary name and linked into
// place, so no reader ever sees it half-written, and the link fails if
// another process created the name first.
func Create(path string, data []byte) error {
	return write(path, data, func(tmp string) error {
		if err := os.Link(tmp, path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %s", ErrExists, path)
			}
			return err
		}
		return nil
	})
}

// Replace writes data to path, mode 0600, replacing any file there in one
// step (a rename), so that a crash leaves either the old secret or the new
// one, never half of one.
func Replace(path string, data []byte) error {
	return write(path, data, func(tmp string) error { return os.Rename(tmp, path) })
}

// write puts data in a synced temporary file beside path and hands its
// name to place.
func write(path string, data []byte, place func(tmp string) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return place(tmp.Name())
}

// LoadOrCreate returns the contents of the secret file at path, creating
// it from generate if it does not exist. When two processes race to create
// it, the first one's secret is everybody's.
func LoadOrCreate(path string, limit int64, generate func() ([]byte, error)) (data []byte, created bool, err error) {
	data, err = Read(path, limit)
	if !errors.Is(err, fs.ErrNotExist) {
		return data, false, err
	}
	if data, err = generate(); err != nil {
		return nil, false, err
	}
	switch err := Create(path, data); {
	case errors.Is(err, ErrExists):
		data, err = Read(path, limit)
		return data, false, err
	case err != nil:
		return nil, false, err
	}
	return data, true, nil
}
