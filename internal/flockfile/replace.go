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
// never a truncated file. The lock is on path+".lock", a file that is never
// replaced (a lock on path itself would be lost with the inode the rename
// drops). f gets nil when path does not exist yet.
func Replace(ctx context.Context, path string, perm os.FileMode, timeout time.Duration, f func(old []byte) (new []byte, err error)) error {
	lockFile, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return err
	}
	defer lockFile.Close()
	if err := lock(ctx, lockFile, timeout); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Flock(int(lockFile.Fd()), unix.LOCK_UN)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	data, err := f(old)
	if err != nil || data == nil {
		return err
	}
	return writeWhole(path, perm, data)
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
