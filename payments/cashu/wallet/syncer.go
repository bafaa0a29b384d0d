package wallet

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"
)

// syncer fsyncs the proof files a Wallet appended to at most every
// interval, and at Close, rather than after every operation: an append is
// safe from a crash of the process once written, and an fsync per paid
// call would cost more than the call. Its timer runs only while a file
// waits to be fsynced.
type syncer struct {
	interval time.Duration
	log      *slog.Logger
	fsync    func(path string) error // fsyncPath; counted in tests

	flushing sync.Mutex // one flush at a time: Close waits for the timer's

	mu     sync.Mutex
	dirty  map[string]bool
	timer  *time.Timer
	closed bool
}

func newSyncer(interval time.Duration, log *slog.Logger) *syncer {
	return &syncer{interval: interval, log: log, fsync: fsyncPath}
}

// mark has path fsynced within the interval; after close, at once.
func (s *syncer) mark(path string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.fsync(path)
	}
	if s.dirty == nil {
		s.dirty = map[string]bool{}
	}
	s.dirty[path] = true
	if s.timer == nil {
		s.timer = time.AfterFunc(s.interval, func() {
			if err := s.flush(); err != nil {
				s.log.Warn("cashu wallet: fsyncing a proof file", "err", err)
			}
		})
	}
	s.mu.Unlock()
	return nil
}

// flush fsyncs the files marked.
func (s *syncer) flush() error {
	s.flushing.Lock()
	defer s.flushing.Unlock()
	s.mu.Lock()
	dirty := s.dirty
	s.dirty, s.timer = nil, nil
	s.mu.Unlock()
	var errs []error
	for path := range dirty {
		errs = append(errs, s.fsync(path))
	}
	return errors.Join(errs...)
}

// close stops the timer and fsyncs what waits; later marks fsync at once.
func (s *syncer) close() error {
	s.mu.Lock()
	s.closed = true
	t := s.timer
	s.timer = nil
	s.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	return s.flush()
}

// fsyncPath fsyncs the file at path, the one there now: a file replaced
// meanwhile (compacted) was fsynced whole before its rename.
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
