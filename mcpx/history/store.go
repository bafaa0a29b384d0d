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
	// QueueSize bounds the records reserved and not yet committed (default
	// 4096). Reserve waits while they are that many: a disk slower than
	// the ingest rate pushes publishers back instead of growing the queue.
	// It is also how far sequence numbers skip after a crash.
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
		o.QueueSize = 4096
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
	gapKey       = []byte("gap")  // the QueueSize of the process that has the store open
	seqBucket    = []byte("seq")  // big-endian seq -> record
	idsBucket    = []byte("ids")  // idKey(id, seq) -> nothing: every record with that id
	oldIDBucket  = []byte("id")   // envelope id -> the newest seq with it (stores before "ids")
	lastKey      = []byte("last") // the topic's highest stored seq
	countKey     = []byte("n")    // records the topic holds
)

// legacyCrashGap is the bound on records in flight of the stores that did
// not record theirs: their default queue (16384) plus a batch (4096).
const legacyCrashGap = 16384 + 4096

// Store is a bbolt-backed history. All methods are safe for concurrent use.
//
// Writing a record takes three steps: Reserve a place in the commit queue
// (waiting while it is full), NextSeq, then Append. NextSeq and Append for
// one topic must be called in the same order (the gateway holds its topic
// lock across both, and reserves before taking it), so that records are
// committed, and become visible, in sequence order.
type Store struct {
	db   *bolt.DB
	opts Options

	// crashGap is added to every topic's stored last seq when the previous
	// process did not close the store: the records it had reserved were
	// lost, and their numbers may have been seen by clients.
	crashGap uint64

	mu   sync.Mutex
	seqs map[string]uint64 // last seq handed out per topic, once loaded

	// places holds a token per record reserved and not yet committed: the
	// bound of the commit queue.
	places chan struct{}

	qmu     sync.Mutex
	queue   []op // records and barriers for the writer, in order
	closed  bool
	wake    chan struct{} // the queue grew, or the store is closing
	closing chan struct{} // closed by Close: Reserve stops waiting
	done    chan struct{} // closed when the writer exits
}

// op is a record to write, or a barrier (sync non-nil) to acknowledge once
// everything before it is committed.
type op struct {
	topic     string
	rec       Record
	committed func(error)
	sync      chan error
}

// Open opens or creates the store at path.
func Open(path string, opts Options) (*Store, error) {
	opts.defaults()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	s := &Store{
		db:      db,
		opts:    opts,
		seqs:    map[string]uint64{},
		places:  make(chan struct{}, opts.QueueSize),
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		topics, err := tx.CreateBucketIfNotExists(topicsBucket)
		if err != nil {
			return err
		}
		// A store that was open and never closed lost what it had queued:
		// at most the queue bound of the process that had it open.
		if v := meta.Get(cleanKey); v != nil && string(v) != "1" {
			s.crashGap = decodeUint(meta.Get(gapKey))
			if s.crashGap == 0 {
				s.crashGap = legacyCrashGap
			}
		}
		if err := meta.Put(gapKey, encodeUint(uint64(opts.QueueSize))); err != nil {
			return err
		}
		if err := migrateIDIndex(topics); err != nil {
			return err
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

// NextSeq allocates the next sequence number of topic, for a record
// Reserve made room for.
func (s *Store) NextSeq(topic string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, err := s.lastLocked(topic)
	if err != nil {
		return 0, err
	}
	last++
	s.seqs[topic] = last
	return last, nil
}

// LatestSeq is the last sequence number handed out for topic (0 if none).
// After a crash it includes the gap, as NextSeq does: numbers up to it may
// have been seen by clients, even if history never stored them.
func (s *Store) LatestSeq(topic string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLocked(topic)
}

func (s *Store) lastLocked(topic string) (uint64, error) {
	if last, ok := s.seqs[topic]; ok {
		return last, nil
	}
	last, err := s.storedLast(topic)
	if err != nil {
		return 0, err
	}
	last += s.crashGap
	s.seqs[topic] = last
	return last, nil
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

// Reserve takes a place in the commit queue for one record, waiting while
// QueueSize records are reserved and not yet committed, until ctx is done.
// The place is given back when the record is committed, or by Release if
// no record is appended.
func (s *Store) Reserve(ctx context.Context) error {
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	select {
	case s.places <- struct{}{}:
		return nil
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives back a place Reserve took that no record will use.
func (s *Store) Release() {
	select {
	case <-s.places:
	default: // more releases than reservations: nothing to give back
	}
}

// Append queues r, in the place Reserve took for it, for writing to
// topic's history. It never waits. committed, if not nil, is called from
// the writer goroutine once r's transaction is committed (nil) or has
// failed: it must not block or call the Store. If Append fails, the place
// is given back and committed is not called.
func (s *Store) Append(topic string, r Record, committed func(error)) error {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		s.Release()
		return ErrClosed
	}
	s.queue = append(s.queue, op{topic: topic, rec: r, committed: committed})
	s.qmu.Unlock()
	s.signal()
	return nil
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Sync waits until every record appended before it was called is committed,
// and reports the failure of the last commit it waited for, if any.
func (s *Store) Sync(ctx context.Context) error {
	ack := make(chan error, 1)
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, op{sync: ack})
	s.qmu.Unlock()
	s.signal()
	select {
	case err := <-ack:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close commits what is queued, marks the store clean and closes the file.
func (s *Store) Close() error {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.qmu.Unlock()
	s.signal()
	<-s.done
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(metaBucket).Put(cleanKey, []byte("1"))
	})
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// write is the writer goroutine: it commits queued records in batches,
// taking whatever has queued while the previous batch was committed (group
// commit: one fsync for all of them, whichever topics and publishers they
// come from), until Close and an empty queue.
func (s *Store) write() {
	defer close(s.done)
	sweep := time.NewTicker(s.opts.SweepInterval)
	defer sweep.Stop()
	batch := make([]op, 0, s.opts.MaxBatch)
	for {
		s.qmu.Lock()
		n := min(len(s.queue), s.opts.MaxBatch)
		batch = append(batch[:0], s.queue[:n]...)
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		closed := s.closed
		s.qmu.Unlock()
		if n == 0 {
			if closed {
				return
			}
			select {
			case <-s.wake:
			case <-sweep.C:
				s.logErr("age sweep", s.db.Update(func(tx *bolt.Tx) error { return s.sweepAll(tx) }))
			}
			continue
		}
		err := s.commit(batch)
		s.logErr("commit", err)
		for i := range batch {
			if o := &batch[i]; o.sync != nil {
				o.sync <- err
			} else {
				if o.committed != nil {
					o.committed(err)
				}
				s.Release()
			}
		}
		clear(batch) // the records' bytes and callbacks are not ours to keep
	}
}

func (s *Store) logErr(what string, err error) {
	if err != nil {
		s.opts.Logger.Error("history write failed", "op", what, "err", err)
	}
}

func (s *Store) commit(batch []op) error {
	records := false
	for i := range batch {
		records = records || batch[i].sync == nil
	}
	if !records {
		return nil // barriers only: everything before them is committed already
	}
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
			seqs, ids := tb.Bucket(seqBucket), tb.Bucket(idsBucket)
			key := encodeUint(o.rec.Seq)
			if old := seqs.Get(key); old == nil {
				if err := tb.Put(countKey, encodeUint(decodeUint(tb.Get(countKey))+1)); err != nil {
					return err
				}
			} else if r, err := decodeRecord(key, old); err == nil {
				if err := ids.Delete(idKey(r.ID, r.Seq)); err != nil {
					return err
				}
			}
			if err := seqs.Put(key, buf); err != nil {
				return err
			}
			if err := ids.Put(idKey(o.rec.ID, o.rec.Seq), []byte{}); err != nil {
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
	if _, err := tb.CreateBucketIfNotExists(idsBucket); err != nil {
		return nil, err
	}
	return tb, nil
}

// idKey is the id index's key of a record: the id, length-prefixed so
// that no id's keys start with another's, then the seq, so that the
// records of one id are adjacent and in order.
func idKey(id string, seq uint64) []byte {
	k := idPrefix(id)
	return binary.BigEndian.AppendUint64(k, seq)
}

func idPrefix(id string) []byte {
	return appendString(make([]byte, 0, binary.MaxVarintLen64+len(id)+8), id)
}

// migrateIDIndex rebuilds the id index of topics written before it held
// every record of an id (the old one kept only the newest, so a lookup
// could not skip a record its reader may not see).
func migrateIDIndex(topics *bolt.Bucket) error {
	var old [][]byte
	err := topics.ForEachBucket(func(name []byte) error {
		if topics.Bucket(name).Bucket(oldIDBucket) != nil {
			old = append(old, name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range old {
		tb := topics.Bucket(name)
		ids, err := tb.CreateBucketIfNotExists(idsBucket)
		if err != nil {
			return err
		}
		seqs := tb.Bucket(seqBucket)
		if seqs != nil {
			err := seqs.ForEach(func(k, v []byte) error {
				r, err := decodeRecord(k, v)
				if err != nil {
					return err
				}
				return ids.Put(idKey(r.ID, r.Seq), []byte{})
			})
			if err != nil {
				return err
			}
		}
		if err := tb.DeleteBucket(oldIDBucket); err != nil {
			return err
		}
	}
	return nil
}

// retain deletes a topic's oldest records beyond the count and age limits.
func (s *Store) retain(tb *bolt.Bucket) error {
	seqs, ids := tb.Bucket(seqBucket), tb.Bucket(idsBucket)
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
		if r, err := decodeRecord(k, v); err == nil {
			if err := ids.Delete(idKey(r.ID, r.Seq)); err != nil {
				return err
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
