package history

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	bolt "go.etcd.io/bbolt"
)

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// appendN stores n records in topic, ids "<topic>-<seq>", received one
// second apart from base.
func appendN(t *testing.T, s *Store, topic string, n int, base time.Time, to ...string) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := 0; i < n; i++ {
		seq, err := s.NextSeq(topic)
		if err != nil {
			t.Fatal(err)
		}
		r := Record{Seq: seq, ID: fmt.Sprintf("%s-%d", topic, seq), From: "alice", To: to,
			Received: base.Add(time.Duration(seq) * time.Second), Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
		if err := s.Reserve(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(topic, r, nil); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func seqsOf(p Page) []uint64 {
	out := []uint64{}
	for _, r := range p.Records {
		out = append(out, r.Seq)
	}
	return out
}

func query(t *testing.T, s *Store, topic string, q Query) Page {
	t.Helper()
	p, err := s.Query(context.Background(), topic, q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func eq(a, b []uint64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestStore_PagingNewestFirstWithExclusiveCursors(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	defer s.Close()
	base := time.Now()
	appendN(t, s, "room:a", 10, base) // seq n received at base+n s
	at := func(n int) *Cursor { return AtTime(base.Add(time.Duration(n) * time.Second)) }
	cases := []struct {
		name string
		q    Query
		want []uint64
		more bool
	}{
		{"newest page", Query{Limit: 3}, []uint64{10, 9, 8}, true},
		{"before 8", Query{Limit: 3, Before: AtSeq(8)}, []uint64{7, 6, 5}, true},
		{"before 2", Query{Limit: 3, Before: AtSeq(2)}, []uint64{1}, false},
		// The reference returns the newest page for before=<oldest id>.
		{"before the oldest is empty", Query{Limit: 3, Before: AtSeq(1)}, []uint64{}, false},
		{"before 0 is empty", Query{Limit: 3, Before: AtSeq(0)}, []uint64{}, false},
		{"before past the end", Query{Limit: 2, Before: AtSeq(99)}, []uint64{10, 9}, true},
		// after=0 is the start of history, not "no cursor".
		{"after 0 is the oldest page", Query{Limit: 3, After: AtSeq(0)}, []uint64{3, 2, 1}, true},
		{"after 3 walks forward", Query{Limit: 3, After: AtSeq(3)}, []uint64{6, 5, 4}, true},
		{"after 8", Query{Limit: 3, After: AtSeq(8)}, []uint64{10, 9}, false},
		{"after the newest is empty", Query{Limit: 3, After: AtSeq(10)}, []uint64{}, false},
		{"after the largest seq is empty", Query{Limit: 3, After: AtSeq(1<<64 - 1)}, []uint64{}, false},
		{"window", Query{Limit: 10, After: AtSeq(3), Before: AtSeq(6)}, []uint64{5, 4}, false},
		{"empty window", Query{Limit: 10, After: AtSeq(3), Before: AtSeq(0)}, []uint64{}, false},
		{"after the zero time is the oldest page", Query{Limit: 2, After: AtTime(time.Time{})}, []uint64{2, 1}, true},
		{"before the zero time is empty", Query{Limit: 2, Before: AtTime(time.Time{})}, []uint64{}, false},
		{"after a time walks forward", Query{Limit: 2, After: at(4)}, []uint64{6, 5}, true},
		{"after the last time is empty", Query{Limit: 2, After: at(10)}, []uint64{}, false},
		{"before a time", Query{Limit: 2, Before: at(4)}, []uint64{3, 2}, true},
		{"before the first time is empty", Query{Limit: 2, Before: at(1)}, []uint64{}, false},
		{"time window", Query{Limit: 10, After: at(2), Before: at(5)}, []uint64{4, 3}, false},
	}
	for _, c := range cases {
		p := query(t, s, "room:a", c.q)
		if !eq(seqsOf(p), c.want) || p.More != c.more {
			t.Errorf("%s: got %v more=%v, want %v more=%v", c.name, seqsOf(p), p.More, c.want, c.more)
		}
	}
	if p := query(t, s, "room:none", Query{Limit: 3}); len(p.Records) != 0 {
		t.Errorf("unknown topic: %v", seqsOf(p))
	}
}

func TestStore_VisibilityFilterDoesNotShortenPages(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	defer s.Close()
	base := time.Now()
	appendN(t, s, "room:a", 3, base)          // 1-3 broadcast
	appendN(t, s, "room:a", 3, base, "carol") // 4-6 to carol
	visible := func(from string, to []string) bool { return len(to) == 0 }
	p := query(t, s, "room:a", Query{Limit: 2, Visible: visible})
	if !eq(seqsOf(p), []uint64{3, 2}) || !p.More {
		t.Errorf("got %v more=%v", seqsOf(p), p.More)
	}
}

func TestStore_LookupByEnvelopeID(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	defer s.Close()
	appendN(t, s, "room:a", 3, time.Now())
	seq, ok, err := s.Lookup(context.Background(), "room:a", "room:a-2", nil)
	if err != nil || !ok || seq != 2 {
		t.Fatalf("lookup: %d %v %v", seq, ok, err)
	}
	if _, ok, _ := s.Lookup(context.Background(), "room:a", "nope", nil); ok {
		t.Fatal("unknown id found")
	}
	// An id that is another id's prefix is another id.
	if _, ok, _ := s.Lookup(context.Background(), "room:a", "room:a-", nil); ok {
		t.Fatal("a prefix of an id found")
	}
}

// A lookup finds the newest record with the id that the reader may see: an
// id is the sender's choice, so two senders can use the same one, and a
// record the reader may not see must not answer for it.
func TestStore_LookupSkipsRecordsTheReaderMayNotSee(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	defer s.Close()
	now := time.Now()
	for i, r := range []Record{
		{ID: "x", From: "alice", To: []string{"bob"}}, // 1
		{ID: "x", From: "carol"},                      // 2: a broadcast
		{ID: "x", From: "dave", To: []string{"erin"}}, // 3
		{ID: "y", From: "dave", To: []string{"erin"}}, // 4
	} {
		r.Seq, r.Received, r.Data = uint64(i+1), now, []byte("{}")
		if err := s.Reserve(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.NextSeq("room:a"); err != nil {
			t.Fatal(err)
		}
		if err := s.Append("room:a", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	visibleTo := func(reader string) func(string, []string) bool {
		return func(from string, to []string) bool {
			return len(to) == 0 || from == reader || slices.Contains(to, reader)
		}
	}
	for _, c := range []struct {
		reader, id string
		seq        uint64 // 0: not found
	}{
		{"alice", "x", 2}, {"bob", "x", 2}, {"erin", "x", 3}, {"dave", "x", 3}, {"frank", "x", 2},
		{"erin", "y", 4}, {"frank", "y", 0}, {"alice", "y", 0},
	} {
		seq, ok, err := s.Lookup(context.Background(), "room:a", c.id, visibleTo(c.reader))
		if err != nil || seq != c.seq || ok != (c.seq != 0) {
			t.Errorf("%s looks up %s: seq %d ok=%v err=%v, want %d", c.reader, c.id, seq, ok, err, c.seq)
		}
	}
	// alice's own x, the oldest, is found when nothing newer is visible.
	onlyAlices := func(from string, _ []string) bool { return from == "alice" }
	if seq, _, _ := s.Lookup(context.Background(), "room:a", "x", onlyAlices); seq != 1 {
		t.Errorf("alice's own x: seq %d, want 1", seq)
	}
}

// A record past the age limit is not a cursor, as it is not in any page.
func TestStore_LookupSkipsExpiredRecords(t *testing.T) {
	now := time.Now()
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{MaxAge: time.Hour, Now: func() time.Time { return now }})
	defer s.Close()
	appendN(t, s, "room:a", 1, now.Add(-2*time.Hour))
	if _, ok, err := s.Lookup(context.Background(), "room:a", "room:a-1", nil); ok || err != nil {
		t.Fatalf("an expired record found: %v %v", ok, err)
	}
}

func TestStore_SurvivesRestartAndKeepsSequence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s := open(t, path, Options{})
	appendN(t, s, "room:a", 3, time.Now())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
	defer s.Close()
	if p := query(t, s, "room:a", Query{Limit: 10}); !eq(seqsOf(p), []uint64{3, 2, 1}) {
		t.Fatalf("after restart: %v", seqsOf(p))
	}
	if seq, _ := s.NextSeq("room:a"); seq != 4 {
		t.Fatalf("next seq after a clean restart %d, want 4", seq)
	}
	topics, _ := s.Topics()
	if fmt.Sprint(topics) != "[room:a]" {
		t.Fatalf("topics %v", topics)
	}
}

// crash stops s as a killed process would: what is queued is never
// committed and the store is not marked clean.
func crash(s *Store) {
	s.qmu.Lock()
	s.queue = nil
	s.closed = true
	close(s.closing)
	s.qmu.Unlock()
	s.signal()
	<-s.done
	s.db.Close()
}

func TestStore_SequenceNeverRepeatsAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s := open(t, path, Options{QueueSize: 8, MaxBatch: 4})
	appendN(t, s, "room:a", 3, time.Now())
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	crash(s)

	// The gap is the queue bound of the process that crashed, not of the
	// one that opens the file next.
	s = open(t, path, Options{QueueSize: 2, MaxBatch: 1})
	latest, _ := s.LatestSeq("room:a")
	seq, _ := s.NextSeq("room:a")
	if seq <= 3+8 {
		t.Fatalf("next seq after a crash %d: it could repeat a number handed out before", seq)
	}
	// The welcome's latest_seq says where numbering resumes, so a client
	// that saw numbers that were never stored resumes without a warning.
	if latest != seq-1 {
		t.Fatalf("latest seq %d before the first new one, %d", latest, seq)
	}
	crash(s)
	s = open(t, path, Options{})
	defer s.Close()
	if next, _ := s.NextSeq("room:a"); next <= 3+2 {
		t.Fatalf("after a second crash, next seq %d", next)
	}
}

// The commit queue is bounded: Reserve waits while QueueSize records are
// reserved and not committed, and a commit gives their places back.
func TestStore_ReserveWaitsForRoomInTheQueue(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{QueueSize: 2})
	defer s.Close()
	ctx := context.Background()
	for range 2 {
		if err := s.Reserve(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.Reserve(short); err != context.DeadlineExceeded {
		t.Fatalf("a third reservation in a queue of two: %v", err)
	}
	s.Release()
	committed := make(chan error, 1)
	if err := s.Append("room:a", Record{Seq: 1, ID: "a", Data: []byte("{}"), Received: time.Now()}, func(err error) { committed <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	// One place was given back by Release, one by the commit.
	for range 2 {
		if err := s.Reserve(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// committed runs once the record is in the file: a gateway acknowledges
// an envelope from there.
func TestStore_CommittedRunsAfterTheCommit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	defer s.Close()
	stored := make(chan bool, 100)
	for i := uint64(1); i <= 100; i++ {
		if err := s.Reserve(context.Background()); err != nil {
			t.Fatal(err)
		}
		err := s.Append("room:a", Record{Seq: i, ID: fmt.Sprint("e", i), Data: []byte("{}"), Received: time.Now()}, func(err error) {
			found := false
			s.db.View(func(tx *bolt.Tx) error { // not Lookup: it would wait for this very writer
				found = tx.Bucket(topicsBucket).Bucket([]byte("room:a")).Bucket(seqBucket).Get(encodeUint(i)) != nil
				return nil
			})
			stored <- err == nil && found
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		if !<-stored {
			t.Fatal("committed was called before its record could be read")
		}
	}
}

func TestStore_CloseWakesReserve(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{QueueSize: 1})
	if err := s.Reserve(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Reserve(context.Background()) }()
	s.Close()
	if err := <-done; err != ErrClosed {
		t.Fatalf("reserve across close: %v", err)
	}
}

// Stores written before the id index held every record of an id are
// migrated when opened.
func TestStore_OldIDIndexIsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		topics, _ := tx.CreateBucket(topicsBucket)
		tb, _ := topics.CreateBucket([]byte("room:a"))
		seqs, _ := tb.CreateBucket(seqBucket)
		old, _ := tb.CreateBucket(oldIDBucket)
		for i, r := range []Record{{ID: "x", From: "alice", To: []string{"bob"}}, {ID: "x", From: "carol", To: []string{"dave"}}} {
			r.Seq, r.Received, r.Data = uint64(i+1), time.Now(), []byte("{}")
			seqs.Put(encodeUint(r.Seq), encodeRecord(nil, &r))
			old.Put([]byte(r.ID), encodeUint(r.Seq))
		}
		tb.Put(lastKey, encodeUint(2))
		return tb.Put(countKey, encodeUint(2))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, path, Options{MaxAge: -1})
	defer s.Close()
	bobs := func(from string, to []string) bool { return from == "bob" || slices.Contains(to, "bob") }
	if seq, ok, err := s.Lookup(context.Background(), "room:a", "x", bobs); seq != 1 || !ok || err != nil {
		t.Fatalf("bob's x after the migration: %d %v %v", seq, ok, err)
	}
	s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(topicsBucket).Bucket([]byte("room:a")).Bucket(oldIDBucket) != nil {
			t.Error("the old index is still there")
		}
		return nil
	})
}

func TestStore_RetentionByCount(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{MaxPerTopic: 5})
	defer s.Close()
	appendN(t, s, "room:a", 12, time.Now())
	p := query(t, s, "room:a", Query{Limit: 100})
	if !eq(seqsOf(p), []uint64{12, 11, 10, 9, 8}) {
		t.Fatalf("kept %v", seqsOf(p))
	}
	if _, ok, _ := s.Lookup(context.Background(), "room:a", "room:a-3", nil); ok {
		t.Fatal("the id index still names a deleted record")
	}
	if seq, _ := s.NextSeq("room:a"); seq != 13 {
		t.Fatalf("next seq %d, want 13", seq)
	}
}

func TestStore_RetentionByAge(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{MaxAge: time.Hour, Now: clock, SweepInterval: 10 * time.Millisecond})
	defer s.Close()
	appendN(t, s, "room:a", 3, now.Add(-2*time.Hour)) // received 2h ago (+seq seconds)
	appendN(t, s, "room:a", 2, now.Add(-time.Minute))
	// Expired records are hidden at once, whether or not a sweep ran.
	if p := query(t, s, "room:a", Query{Limit: 100}); !eq(seqsOf(p), []uint64{5, 4}) {
		t.Fatalf("visible %v", seqsOf(p))
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	// The sweep deletes them from an idle topic.
	testwait.Eventually(t, 10*time.Second, "the age sweep to delete the expired records", func() bool {
		_, ok, _ := s.Lookup(context.Background(), "room:a", "room:a-5", nil)
		return !ok
	})
}

func TestStore_ClosedStoreRefuses(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	s.Close()
	if err := s.Append("t", Record{Seq: 1}, nil); err != ErrClosed {
		t.Fatalf("append after close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestRecord_EncodingRoundTrip(t *testing.T) {
	r := Record{Seq: 9, ID: "env-1", From: "alice", To: []string{"bob", "carol"}, Received: time.Unix(0, 123456789), Data: []byte(`{"x":1}`)}
	got, err := decodeRecord(encodeUint(9), encodeRecord(nil, &r))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
		t.Fatalf("got %+v %v, want %+v", got, err, r)
	}
	for i := 0; i < len(encodeRecord(nil, &r)); i++ {
		decodeRecord(encodeUint(9), encodeRecord(nil, &r)[:i]) // must not panic on truncation
	}
}
