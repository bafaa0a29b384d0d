package flockfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Replace is Update for a file whose loss costs money: the new contents go
// to a temporary file that is fsynced and then renamed over path, so a
// crash at any point leaves either the old contents or the new ones whole,
// never a truncated file. f gets nil when path does not exist yet.
func Replace(ctx context.Context, path string, perm os.FileMode, timeout time.Duration, f func(old []byte) (new []byte, err error)) error {
	h, err := Hold(ctx, path, perm, timeout)
	if err != nil {
		return err
	}
	defer h.Close()
	old, err := h.Read()
	if err != nil {
		return err
	}
	data, err := f(old)
	if err != nil || data == nil {
		return err
	}
	return h.Write(data)
}

// Held is a file held under its lock for several reads and writes, for a
// transaction that spans more than one write (a write before a request to
// another party, and one after its answer).
type Held struct {
	path string
	perm os.FileMode
	lock *os.File
}

// Hold locks path for its caller until Close, waiting at most timeout.
// The lock is on path+".lock", a file that is never replaced (a lock on
// path itself would go with the inode a rename drops).
func Hold(ctx context.Context, path string, perm os.FileMode, timeout time.Duration) (*Held, error) {
	lockFile, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if err := lock(ctx, lockFile, timeout); err != nil {
		lockFile.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Held{path: path, perm: perm, lock: lockFile}, nil
}

// Read returns the file's contents, nil when it does not exist yet.
func (h *Held) Read() ([]byte, error) {
	data, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Write replaces the file's contents whole (see Replace).
func (h *Held) Write(data []byte) error { return writeWhole(h.path, h.perm, data) }

// Close releases the lock.
func (h *Held) Close() error {
	unix.Flock(int(h.lock.Fd()), unix.LOCK_UN)
	return h.lock.Close()
}

// writeWhole writes data to path by way of path+".tmp": written, fsynced,
// renamed, and the directory fsynced so that the rename itself survives a
// power loss. Only the holder of the lock writes the temporary file.
func writeWhole(path string, perm os.FileMode, data []byte) error {
	tmp := path + ".tmp"
	file, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		return err
	}
	if err := file.Sync(); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
