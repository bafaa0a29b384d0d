package durable

import (
	"bytes"
	"context"
	"errors"
	"time"
)

var (
	// ErrFull is returned by Claim and Put when the store holds MaxRecords
	// records that have not expired: refusing the new record is safe, while
	// forgetting a live one would let what it guards happen twice.
	ErrFull = errors.New("durable: store is full")
	// ErrLocked is returned by Open when another process has the store open.
	ErrLocked = errors.New("durable: store is in use by another process")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("durable: store is closed")
)

// Store keeps records that survive a crash. Methods are safe for concurrent
// use. A space is a namespace of keys; keys and values are bytes. An expired
// record is as good as absent.
type Store interface {
	// Claim records key in space, to expire at expires, unless a record
	// with that key is there: claimed reports whether this call made it.
	// When Claim returns (true, nil) the record survives a crash.
	Claim(ctx context.Context, space string, key []byte, expires time.Time) (claimed bool, err error)
	// Get returns the value of key in space.
	Get(ctx context.Context, space string, key []byte) (value []byte, ok bool, err error)
	// Put sets key in space to value, to expire at expires, replacing any
	// record. When it returns nil the record survives a crash.
	Put(ctx context.Context, space string, key, value []byte, expires time.Time) error
	// Close makes the records durable on disk and releases the store.
	Close() error
}

// Swapper is a Store that can also change a record only if it is still
// what the caller read: what a read-modify-write needs when several
// processes share the store (a replica group), where a lock in one process
// serializes nothing. Memory, File and natskv.Store are Swappers.
type Swapper interface {
	Store
	// Swap sets key in space to value, to expire at expires, only if the
	// record is old now: old nil means only if there is no record (or an
	// expired one); a record with an empty value is matched by a non-nil
	// empty old. swapped reports whether this call made the change, and
	// when Swap returns (true, nil) the record survives a crash as Put's
	// does. Of any number of callers swapping from the same old, at most
	// one succeeds.
	Swap(ctx context.Context, space string, key, old, value []byte, expires time.Time) (swapped bool, err error)
}

var (
	_ Swapper = (*Memory)(nil)
	_ Swapper = (*File)(nil)
)

// holds reports whether a record (present or not, with value v) is the
// old a Swap expects.
func holds(v []byte, present bool, old []byte) bool {
	if old == nil {
		return !present
	}
	return present && bytes.Equal(v, old)
}

// Options configure a store. Zero values take the defaults beside them.
type Options struct {
	// MaxRecords bounds the records held, expired ones not counted
	// (default 1,000,000: about 100 MB of memory at most).
	MaxRecords int
	// SyncInterval is the longest a record waits for fsync (default 1 s):
	// what a power loss can lose.
	SyncInterval time.Duration
	// CheckpointInterval is how often the journal is folded into the bbolt
	// file (default 1 min), and JournalBytes the size that folds it sooner
	// (default 64 MiB).
	CheckpointInterval time.Duration
	JournalBytes       int64
	// Now is the clock for expiries (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxRecords <= 0 {
		o.MaxRecords = 1_000_000
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = time.Second
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.JournalBytes <= 0 {
		o.JournalBytes = 64 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
