package durable

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// lockWait is how long Open waits for bbolt's file lock: long enough for a
// process that is closing the store to finish, short enough that a second
// process sharing the store learns it at once rather than hanging.
const lockWait = 200 * time.Millisecond

// metaBucket holds the store's own bookkeeping; spaces are buckets named
// spacePrefix+space, so that no space can collide with it.
var (
	metaBucket = []byte("meta")
	foldedKey  = []byte("folded") // the last journal generation folded in
)

const spacePrefix = "s:"

// File is a Store in a directory: a bbolt file, NAME.db, and journals,
// NAME.journal.GEN (see the package documentation for what survives what).
type File struct {
	opts Options
	db   *bolt.DB
	base string // dir/name

	mu      sync.Mutex
	t       *table
	journal *os.File
	gen     uint64
	size    int64
	pending map[string]map[string]record // written since the last fold
	dirty   bool                         // written since the last fsync
	closed  bool
	buf     []byte

	foldMu sync.Mutex // one fold, or fsync of the journal, at a time
	fold   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Open opens (or creates) the store NAME in dir. A second Open of the same
// store, by this process or another, fails with ErrLocked.
func Open(dir, name string, opts Options) (*File, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("durable: %w", err)
	}
	base := filepath.Join(dir, name)
	db, err := bolt.Open(base+".db", 0o600, &bolt.Options{Timeout: lockWait})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s.db (one process per server key and data directory)", ErrLocked, base)
	}
	if err != nil {
		return nil, fmt.Errorf("durable: open %s.db: %w", base, err)
	}
	f := &File{
		opts:    opts,
		db:      db,
		base:    base,
		t:       newTable(opts.MaxRecords, opts.Now),
		pending: make(map[string]map[string]record),
		fold:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	if err := f.load(); err != nil {
		db.Close()
		return nil, err
	}
	f.wg.Go(f.run)
	return f, nil
}

// load reads the bbolt file, then replays the journals not folded into it,
// and opens a new journal.
func (f *File) load() error {
	var folded uint64
	err := f.db.View(func(tx *bolt.Tx) error {
		if m := tx.Bucket(metaBucket); m != nil {
			if v := m.Get(foldedKey); len(v) == 8 {
				folded = binary.LittleEndian.Uint64(v)
			}
		}
		now := f.opts.Now()
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			space, ok := strings.CutPrefix(string(name), spacePrefix)
			if !ok {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				if len(v) < 8 {
					return nil
				}
				r := record{expires: time.Unix(0, int64(binary.LittleEndian.Uint64(v)))}
				if len(v) > 8 {
					r.value = append([]byte(nil), v[8:]...)
				}
				if r.expires.After(now) {
					f.t.set(space, string(k), r)
				}
				return nil
			})
		})
	})
	if err != nil {
		return fmt.Errorf("durable: read %s.db: %w", f.base, err)
	}
	gens, err := f.journals()
	if err != nil {
		return err
	}
	f.gen = folded
	for i, gen := range gens {
		path := f.journalPath(gen)
		if gen <= folded {
			os.Remove(path) // folded before a crash that left the file
			continue
		}
		end, err := readJournal(path, func(e entry) {
			r := record{value: e.value, expires: e.expires}
			f.t.set(e.space, e.key, r)
			f.setPending(e.space, e.key, r)
		})
		if err != nil {
			return fmt.Errorf("durable: read journal: %w", err)
		}
		if i == len(gens)-1 {
			// Only the last journal can end in a torn write.
			if err := os.Truncate(path, end); err != nil {
				return fmt.Errorf("durable: cut the torn end of a journal: %w", err)
			}
		}
		f.gen = gen
	}
	return f.rotate()
}

// journals lists the generations of the journal files, in order.
func (f *File) journals() ([]uint64, error) {
	matches, err := filepath.Glob(f.base + ".journal.*")
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, m := range matches {
		gen, err := strconv.ParseUint(strings.TrimPrefix(m, f.base+".journal."), 10, 64)
		if err == nil {
			gens = append(gens, gen)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

func (f *File) journalPath(gen uint64) string {
	return fmt.Sprintf("%s.journal.%020d", f.base, gen)
}

// rotate starts the next journal; the caller holds mu (or owns f alone).
func (f *File) rotate() error {
	j, err := os.OpenFile(f.journalPath(f.gen+1), os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("durable: new journal: %w", err)
	}
	f.journal, f.gen, f.size = j, f.gen+1, 0
	return nil
}

func (f *File) setPending(space, key string, r record) {
	m := f.pending[space]
	if m == nil {
		m = make(map[string]record)
		f.pending[space] = m
	}
	m[key] = r
}

// write journals e and applies it; the caller holds mu.
func (f *File) write(e entry) error {
	if err := checkEntry(e); err != nil {
		return err
	}
	f.buf = appendEntry(f.buf[:0], e)
	if _, err := f.journal.Write(f.buf); err != nil {
		return fmt.Errorf("durable: journal: %w", err)
	}
	r := record{value: e.value, expires: e.expires}
	f.t.set(e.space, e.key, r)
	f.setPending(e.space, e.key, r)
	f.dirty = true
	f.size += int64(len(f.buf))
	if f.size >= f.opts.JournalBytes {
		select {
		case f.fold <- struct{}{}:
		default:
		}
	}
	return nil
}

// Claim implements Store.
func (f *File) Claim(_ context.Context, space string, key []byte, expires time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false, ErrClosed
	}
	if _, ok := f.t.get(space, string(key)); ok {
		return false, nil
	}
	if !f.t.room() {
		return false, ErrFull
	}
	if err := f.write(entry{space: space, key: string(key), expires: expires}); err != nil {
		return false, err
	}
	return true, nil
}

// Get implements Store.
func (f *File) Get(_ context.Context, space string, key []byte) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false, ErrClosed
	}
	r, ok := f.t.get(space, string(key))
	return slices.Clone(r.value), ok, nil
}

// Put implements Store.
func (f *File) Put(_ context.Context, space string, key, value []byte, expires time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if _, ok := f.t.get(space, string(key)); !ok && !f.t.room() {
		return ErrFull
	}
	return f.write(entry{space: space, key: string(key), value: slices.Clone(value), expires: expires})
}

// Swap implements Swapper: the comparison and the write are made under the
// store's lock, and the write is journaled as Put's is.
func (f *File) Swap(_ context.Context, space string, key, old, value []byte, expires time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false, ErrClosed
	}
	r, ok := f.t.get(space, string(key))
	if !holds(r.value, ok, old) {
		return false, nil
	}
	if !ok && !f.t.room() {
		return false, ErrFull
	}
	if err := f.write(entry{space: space, key: string(key), value: slices.Clone(value), expires: expires}); err != nil {
		return false, err
	}
	return true, nil
}

// run fsyncs the journal every SyncInterval and folds it into the bbolt
// file every CheckpointInterval, or sooner when it grows large, until
// Close.
func (f *File) run() {
	sync := time.NewTicker(f.opts.SyncInterval)
	defer sync.Stop()
	fold := time.NewTicker(f.opts.CheckpointInterval)
	defer fold.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-sync.C:
			f.sync()
		case <-fold.C:
			f.checkpoint()
		case <-f.fold:
			f.checkpoint()
		}
	}
}

// sync fsyncs the journal if anything was written since the last time.
func (f *File) sync() error {
	f.foldMu.Lock()
	defer f.foldMu.Unlock()
	f.mu.Lock()
	dirty, j := f.dirty, f.journal
	f.dirty = false
	f.mu.Unlock()
	if !dirty || j == nil {
		return nil
	}
	if err := j.Sync(); err != nil {
		f.mu.Lock()
		f.dirty = true // try again
		f.mu.Unlock()
		return fmt.Errorf("durable: fsync journal: %w", err)
	}
	return nil
}

// checkpoint folds what was journaled into the bbolt file: a new journal
// takes the writes from now on, the old one's records (and the expired
// ones, deleted) go into one bbolt transaction, fsynced, that also records
// the folded generation; only then is the old journal removed.
func (f *File) checkpoint() error {
	f.foldMu.Lock()
	defer f.foldMu.Unlock()
	f.mu.Lock()
	if f.closed && f.journal == nil {
		f.mu.Unlock()
		return nil
	}
	old, oldGen := f.journal, f.gen
	changed := f.pending
	f.pending = make(map[string]map[string]record)
	gone := f.t.sweep()
	if err := f.rotate(); err != nil {
		f.journal, f.pending = old, changed // keep writing to the old one
		f.mu.Unlock()
		return err
	}
	f.dirty = false
	f.mu.Unlock()

	old.Close()
	now := f.opts.Now()
	err := f.db.Update(func(tx *bolt.Tx) error {
		for space, keys := range gone {
			if b := tx.Bucket([]byte(spacePrefix + space)); b != nil {
				for _, k := range keys {
					if err := b.Delete([]byte(k)); err != nil {
						return err
					}
				}
			}
		}
		for space, records := range changed {
			b, err := tx.CreateBucketIfNotExists([]byte(spacePrefix + space))
			if err != nil {
				return err
			}
			for k, r := range records {
				if !r.expires.After(now) {
					if err := b.Delete([]byte(k)); err != nil {
						return err
					}
					continue
				}
				v := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(r.value)), uint64(r.expires.UnixNano()))
				if err := b.Put([]byte(k), append(v, r.value...)); err != nil {
					return err
				}
			}
		}
		m, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		return m.Put(foldedKey, binary.LittleEndian.AppendUint64(nil, oldGen))
	})
	if err != nil {
		// The old journal stays: the next open replays it.
		return fmt.Errorf("durable: fold the journal: %w", err)
	}
	os.Remove(f.journalPath(oldGen))
	return nil
}

// Close folds everything into the bbolt file and closes the store.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	close(f.stop)
	f.wg.Wait()
	err := f.checkpoint()
	f.foldMu.Lock()
	f.mu.Lock()
	if f.journal != nil {
		f.journal.Close()
		if err == nil {
			os.Remove(f.journalPath(f.gen)) // empty: folded above
		}
		f.journal = nil
	}
	f.mu.Unlock()
	f.foldMu.Unlock()
	return errors.Join(err, f.db.Close())
}
