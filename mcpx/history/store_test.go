package history

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
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
		if err := s.Append(context.Background(), topic, r); err != nil {
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
	appendN(t, s, "room:a", 10, time.Now())
	cases := []struct {
		name string
		q    Query
		want []uint64
		more bool
	}{
		{"newest page", Query{Limit: 3}, []uint64{10, 9, 8}, true},
		{"before 8", Query{Limit: 3, BeforeSeq: 8}, []uint64{7, 6, 5}, true},
		{"before 2", Query{Limit: 3, BeforeSeq: 2}, []uint64{1}, false},
		// The reference returns the newest page for before=<oldest id>.
		{"before the oldest is empty", Query{Limit: 3, BeforeSeq: 1}, []uint64{}, false},
		{"after 3 walks forward", Query{Limit: 3, AfterSeq: 3}, []uint64{6, 5, 4}, true},
		{"after 8", Query{Limit: 3, AfterSeq: 8}, []uint64{10, 9}, false},
		{"after the newest is empty", Query{Limit: 3, AfterSeq: 10}, []uint64{}, false},
		{"window", Query{Limit: 10, AfterSeq: 3, BeforeSeq: 6}, []uint64{5, 4}, false},
		{"before past the end", Query{Limit: 2, BeforeSeq: 99}, []uint64{10, 9}, true},
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

func TestStore_TimeCursorsUseReceiveTime(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	defer s.Close()
	base := time.Now().Add(-time.Hour)
	appendN(t, s, "room:a", 5, base)
	p := query(t, s, "room:a", Query{Limit: 10, BeforeTime: base.Add(3 * time.Second)})
	if !eq(seqsOf(p), []uint64{2, 1}) {
		t.Errorf("before time: %v", seqsOf(p))
	}
	p = query(t, s, "room:a", Query{Limit: 10, AfterTime: base.Add(3 * time.Second)})
	if !eq(seqsOf(p), []uint64{5, 4}) {
		t.Errorf("after time: %v", seqsOf(p))
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
	seq, ok, err := s.Lookup(context.Background(), "room:a", "room:a-2")
	if err != nil || !ok || seq != 2 {
		t.Fatalf("lookup: %d %v %v", seq, ok, err)
	}
	if _, ok, _ := s.Lookup(context.Background(), "room:a", "nope"); ok {
		t.Fatal("unknown id found")
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

func TestStore_SequenceNeverRepeatsAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s := open(t, path, Options{QueueSize: 8, MaxBatch: 4})
	appendN(t, s, "room:a", 3, time.Now())
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Simulate a crash: the file is left without the clean mark.
	s.closeMu.Lock()
	s.closed = true
	close(s.in)
	s.closeMu.Unlock()
	<-s.done
	s.db.Close()

	s = open(t, path, Options{QueueSize: 8, MaxBatch: 4})
	defer s.Close()
	seq, _ := s.NextSeq("room:a")
	if seq <= 3+8+4 {
		t.Fatalf("next seq after a crash %d: it could repeat a number handed out before", seq)
	}
}

func TestStore_RetentionByCount(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{MaxPerTopic: 5})
	defer s.Close()
	appendN(t, s, "room:a", 12, time.Now())
	p := query(t, s, "room:a", Query{Limit: 100})
	if !eq(seqsOf(p), []uint64{12, 11, 10, 9, 8}) {
		t.Fatalf("kept %v", seqsOf(p))
	}
	if _, ok, _ := s.Lookup(context.Background(), "room:a", "room:a-3"); ok {
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, ok, _ := s.Lookup(context.Background(), "room:a", "room:a-5")
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the age sweep never deleted expired records")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStore_ClosedStoreRefuses(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "h.db"), Options{})
	s.Close()
	if err := s.Append(context.Background(), "t", Record{Seq: 1}); err != ErrClosed {
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
