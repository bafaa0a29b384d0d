package history

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrClosed is returned by operations on a closed Store.
var ErrClosed = errors.New("history: store closed")

// Record is one stored envelope.
type Record struct {
	Seq      uint64
	ID       string   // the envelope id
	From     string   // the sender, for visibility filtering
	To       []string // the recipients; empty for a broadcast
	Received time.Time
	Data     []byte // the envelope exactly as the gateway forwarded it
}

// Options tune a Store. The zero value is usable.
type Options struct {
	// MaxPerTopic is how many records a topic keeps (default 10000; -1 keeps
	// all).
	MaxPerTopic int
	// MaxAge is how long a record is kept (default 30 days; -1 keeps
	// records forever).
	MaxAge time.Duration
	// QueueSize bounds the records waiting for the writer (default 16384).
	// Append blocks when it is full: a disk slower than the ingest rate
	// slows publishers down rather than losing history.
	QueueSize int
	// MaxBatch bounds the records committed in one transaction (default 4096).
	MaxBatch int
	// SweepInterval is how often age retention runs over idle topics
	// (default 1 minute).
	SweepInterval time.Duration
	// Logger receives write failures; default slog.Default().
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.MaxPerTopic == 0 {
		o.MaxPerTopic = 10000
	}
	if o.MaxAge == 0 {
		o.MaxAge = 30 * 24 * time.Hour
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 16384
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 4096
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Bucket and key names.
var (
	metaBucket   = []byte("meta")
	topicsBucket = []byte("topics")
	cleanKey     = []byte("clean")
	seqBucket    = []byte("seq")  // big-endian seq -> record
	idBucket     = []byte("id")   // envelope id -> big-endian seq (the newest with that id)
	lastKey      = []byte("last") // the topic's highest stored seq
	countKey     = []byte("n")    // records the topic holds
)

// Store is a bbolt-backed history. All methods are safe for concurrent use.
// NextSeq and Append for one topic must be called in the same order (the
// gateway holds its topic lock across both), so that records are stored in
// sequence order.
type Store struct {
	db   *bolt.DB
	opts Options

	// crashGap is added to every topic's stored last seq when the previous
	// process did not close the store: records it had queued were lost, and
	// their numbers may have been seen by clients.
	crashGap uint64

	mu   sync.Mutex
	seqs map[string]uint64 // last seq handed out per topic, once loaded

	in      chan op
	done    chan struct{} // closed when the writer exits
	closeMu sync.RWMutex  // held for reading while sending on in
	closed  bool
}

// op is a record to write, or a barrier (sync non-nil) to acknowledge once
// everything before it is committed.
type op struct {
	topic string
	rec   Record
	sync  chan error
}

// Open opens or creates the store at path.
func Open(path string, opts Options) (*Store, error) {
	opts.defaults()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	s := &Store{
		db:   db,
		opts: opts,
		seqs: map[string]uint64{},
		in:   make(chan op, opts.QueueSize),
		done: make(chan struct{}),
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(topicsBucket); err != nil {
			return err
		}
		// A store that was open and never closed lost what it had queued.
		if v := meta.Get(cleanKey); v != nil && string(v) != "1" {
			s.crashGap = uint64(opts.QueueSize + opts.MaxBatch)
		}
		return meta.Put(cleanKey, []byte("0"))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	if s.crashGap > 0 {
		opts.Logger.Warn("history was not closed cleanly; sequence numbers skip ahead", "path", path, "gap", s.crashGap)
	}
	go s.write()
	return s, nil
}

// NextSeq allocates the next sequence number of topic.
func (s *Store) NextSeq(topic string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.seqs[topic]
	if !ok {
		var err error
		if last, err = s.storedLast(topic); err != nil {
			return 0, err
		}
		last += s.crashGap
	}
	last++
	s.seqs[topic] = last
	return last, nil
}

// LatestSeq is the last sequence number handed out for topic (0 if none).
func (s *Store) LatestSeq(topic string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.seqs[topic]; ok {
		return last, nil
	}
	return s.storedLast(topic)
}

func (s *Store) storedLast(topic string) (uint64, error) {
	var last uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(topicsBucket).Bucket([]byte(topic)); b != nil {
			last = decodeUint(b.Get(lastKey))
		}
		return nil
	})
	return last, err
}

// Append queues r for writing to topic's history. It blocks while the queue
// is full, until ctx is done.
func (s *Store) Append(ctx context.Context, topic string, r Record) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.in <- op{topic: topic, rec: r}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sync waits until every record appended before it was called is committed,
// and reports the first write failure, if any.
func (s *Store) Sync(ctx context.Context) error {
	ack := make(chan error, 1)
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	select {
	case s.in <- op{sync: ack}:
		s.closeMu.RUnlock()
	case <-ctx.Done():
		s.closeMu.RUnlock()
		return ctx.Err()
	}
	select {
	case err := <-ack:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close commits what is queued, marks the store clean and closes the file.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.in)
	s.closeMu.Unlock()
	<-s.done
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(metaBucket).Put(cleanKey, []byte("1"))
	})
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// write is the writer goroutine: it commits queued records in batches until
// Close closes the queue.
func (s *Store) write() {
	defer close(s.done)
	sweep := time.NewTicker(s.opts.SweepInterval)
	defer sweep.Stop()
	batch := make([]op, 0, s.opts.MaxBatch)
	for {
		var first op
		var ok bool
		select {
		case first, ok = <-s.in:
		case <-sweep.C:
			s.logErr("age sweep", s.db.Update(func(tx *bolt.Tx) error { return s.sweepAll(tx) }))
			continue
		}
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		// Group commit: take whatever else is already queued, without waiting.
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o, ok := <-s.in:
				if !ok {
					break fill
				}
				batch = append(batch, o)
			default:
				break fill
			}
		}
		err := s.commit(batch)
		s.logErr("commit", err)
		for _, o := range batch {
			if o.sync != nil {
				o.sync <- err
			}
		}
	}
}

func (s *Store) logErr(what string, err error) {
	if err != nil {
		s.opts.Logger.Error("history write failed", "op", what, "err", err)
	}
}

func (s *Store) commit(batch []op) error {
	touched := map[string]bool{}
	err := s.db.Update(func(tx *bolt.Tx) error {
		topics := tx.Bucket(topicsBucket)
		for _, o := range batch {
			if o.sync != nil {
				continue
			}
			tb, err := topicBucket(topics, o.topic)
			if err != nil {
				return err
			}
			// bbolt keeps the slices given to Put until the commit: each
			// record needs its own.
			buf := encodeRecord(make([]byte, 0, 64+len(o.rec.Data)), &o.rec)
			seqs, ids := tb.Bucket(seqBucket), tb.Bucket(idBucket)
			key := encodeUint(o.rec.Seq)
			if seqs.Get(key) == nil {
				if err := tb.Put(countKey, encodeUint(decodeUint(tb.Get(countKey))+1)); err != nil {
					return err
				}
			}
			if err := seqs.Put(key, buf); err != nil {
				return err
			}
			if err := ids.Put([]byte(o.rec.ID), key); err != nil {
				return err
			}
			if o.rec.Seq > decodeUint(tb.Get(lastKey)) {
				if err := tb.Put(lastKey, key); err != nil {
					return err
				}
			}
			touched[o.topic] = true
		}
		for t := range touched {
			if err := s.retain(topics.Bucket([]byte(t))); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

func topicBucket(topics *bolt.Bucket, topic string) (*bolt.Bucket, error) {
	tb, err := topics.CreateBucketIfNotExists([]byte(topic))
	if err != nil {
		return nil, err
	}
	if _, err := tb.CreateBucketIfNotExists(seqBucket); err != nil {
		return nil, err
	}
	if _, err := tb.CreateBucketIfNotExists(idBucket); err != nil {
		return nil, err
	}
	return tb, nil
}

// retain deletes a topic's oldest records beyond the count and age limits.
func (s *Store) retain(tb *bolt.Bucket) error {
	seqs, ids := tb.Bucket(seqBucket), tb.Bucket(idBucket)
	n := decodeUint(tb.Get(countKey))
	cutoff := s.cutoff()
	c := seqs.Cursor()
	deleted := uint64(0)
	// After Delete a bbolt cursor's Next skips an element; re-seek to the
	// first record each time instead.
	for k, v := c.First(); k != nil; k, v = c.First() {
		overCount := s.opts.MaxPerTopic >= 0 && n-deleted > uint64(s.opts.MaxPerTopic)
		if !overCount && (cutoff.IsZero() || !receivedBefore(v, cutoff)) {
			break
		}
		// The id index keeps the newest seq for an id; only drop it if it
		// still points here.
		if r, err := decodeRecord(k, v); err == nil {
			if idk := []byte(r.ID); string(ids.Get(idk)) == string(k) {
				if err := ids.Delete(idk); err != nil {
					return err
				}
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
		deleted++
	}
	if deleted > 0 {
		return tb.Put(countKey, encodeUint(n-deleted))
	}
	return nil
}

func (s *Store) sweepAll(tx *bolt.Tx) error {
	topics := tx.Bucket(topicsBucket)
	return topics.ForEachBucket(func(name []byte) error {
		return s.retain(topics.Bucket(name))
	})
}

// cutoff is the receive time before which records have expired; zero when
// records never expire.
func (s *Store) cutoff() time.Time {
	if s.opts.MaxAge < 0 {
		return time.Time{}
	}
	return s.opts.Now().Add(-s.opts.MaxAge)
}

func encodeUint(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func decodeUint(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
