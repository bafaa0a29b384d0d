// Package flockfile updates a small file that several processes share,
// one short transaction at a time under an exclusive flock(2) that is
// waited for at most a timeout, never indefinitely. Update (flockfile.go)
// rewrites the file in place; Replace (replace.go) renames a whole new
// copy over it, for files that a crash mid-write must not leave
// truncated, and Hold keeps such a file locked across several of those
// writes.
package flockfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLockTimeout is returned when another process held the lock for the
// whole timeout.
var ErrLockTimeout = errors.New("flockfile: the file stayed locked by another process")

// lockPoll is how often a held lock is tried again.
const lockPoll = 5 * time.Millisecond

// Update locks path (creating it with mode perm), hands its contents to f
// and, unless f returns an error or nil data, replaces them with f's
// result, all under the lock. It waits at most timeout for the lock.
func Update(ctx context.Context, path string, perm os.FileMode, timeout time.Duration, f func(old []byte) (new []byte, err error)) error {
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := lock(ctx, file, timeout); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Flock(int(file.Fd()), unix.LOCK_UN)
	old, err := io.ReadAll(file)
	if err != nil {
		return err
	}
	data, err := f(old)
	if err != nil || data == nil {
		return err
	}
	if err := file.Truncate(0); err != nil {
		return err
	}
	if _, err := file.WriteAt(data, 0); err != nil {
		return err
	}
	return file.Sync()
}

func lock(ctx context.Context, file *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := unix.Flock(int(file.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (waited %s)", ErrLockTimeout, timeout)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
