package durable

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("DURABLE_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

// clock is a settable clock for expiries.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var ctx = context.Background()

// stores runs f against each implementation.
func stores(t *testing.T, opts Options, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) {
		s := NewMemory(opts)
		defer s.Close()
		f(t, s)
	})
	t.Run("file", func(t *testing.T) {
		s, err := Open(t.TempDir(), "state", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(t, s)
	})
}

func TestStore_ClaimIsOnceUntilExpiry(t *testing.T) {
	c := &clock{now: time.Unix(1_000_000, 0)}
	stores(t, Options{Now: c.Now}, func(t *testing.T, s Store) {
		exp := c.Now().Add(time.Minute)
		if ok, err := s.Claim(ctx, "replay", []byte("id1"), exp); !ok || err != nil {
			t.Fatalf("first claim: %v %v", ok, err)
		}
		if ok, err := s.Claim(ctx, "replay", []byte("id1"), exp); ok || err != nil {
			t.Fatalf("second claim: %v %v", ok, err)
		}
		if ok, _ := s.Claim(ctx, "other", []byte("id1"), exp); !ok {
			t.Fatal("spaces are not separate")
		}
		c.add(time.Minute)
		if ok, _ := s.Claim(ctx, "replay", []byte("id1"), c.Now().Add(time.Minute)); !ok {
			t.Fatal("an expired record still counts")
		}
	})
}

func TestStore_PutGet(t *testing.T) {
	c := &clock{now: time.Unix(1_000_000, 0)}
	stores(t, Options{Now: c.Now}, func(t *testing.T, s Store) {
		if err := s.Put(ctx, "charges", []byte("k"), []byte("v1"), c.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		s.Put(ctx, "charges", []byte("k"), []byte("v2"), c.Now().Add(time.Hour))
		if v, ok, _ := s.Get(ctx, "charges", []byte("k")); !ok || string(v) != "v2" {
			t.Fatalf("get %q %v", v, ok)
		}
		if _, ok, _ := s.Get(ctx, "charges", []byte("none")); ok {
			t.Fatal("found a record never written")
		}
	})
}

// Full of live records, a store refuses new ones rather than forget one
// that still guards something; expired records make room.
func TestStore_FullRefusesNeverForgets(t *testing.T) {
	c := &clock{now: time.Unix(1_000_000, 0)}
	stores(t, Options{Now: c.Now, MaxRecords: 3}, func(t *testing.T, s Store) {
		for i := range 3 {
			s.Claim(ctx, "replay", []byte{byte(i)}, c.Now().Add(time.Duration(i+1)*time.Minute))
		}
		if _, err := s.Claim(ctx, "replay", []byte("x"), c.Now().Add(time.Hour)); !errors.Is(err, ErrFull) {
			t.Fatalf("claim into a full store: %v", err)
		}
		if ok, _ := s.Claim(ctx, "replay", []byte{0}, c.Now().Add(time.Hour)); ok {
			t.Fatal("a live record was forgotten to make room")
		}
		c.add(90 * time.Second) // the first has expired
		if ok, err := s.Claim(ctx, "replay", []byte("x"), c.Now().Add(time.Hour)); !ok || err != nil {
			t.Fatalf("claim once a record expired: %v %v", ok, err)
		}
	})
}

func TestFile_SurvivesCloseAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, "state", Options{JournalBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	for i := range 200 {
		if _, err := s.Claim(ctx, "replay", []byte(strconv.Itoa(i)), exp); err != nil {
			t.Fatal(err)
		}
	}
	s.Put(ctx, "charges", []byte("c"), []byte("paid"), exp)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if j, _ := filepath.Glob(filepath.Join(dir, "state.journal.*")); len(j) != 0 {
		t.Fatalf("journals left after Close: %v", j)
	}
	s, err = Open(dir, "state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 200 {
		if ok, _ := s.Claim(ctx, "replay", []byte(strconv.Itoa(i)), exp); ok {
			t.Fatalf("record %d lost", i)
		}
	}
	if v, ok, _ := s.Get(ctx, "charges", []byte("c")); !ok || string(v) != "paid" {
		t.Fatalf("value lost: %q", v)
	}
}

// A write cut short (the process died mid-write) is cut off when the store
// is opened; everything before it is there.
func TestFile_TornJournalTail(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, "state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	s.Claim(ctx, "replay", []byte("a"), exp)
	s.Claim(ctx, "replay", []byte("b"), exp)
	journal := s.journalPath(s.gen)
	// Leave the journal as a crash would: unfolded, with half a record at
	// its end.
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	s.journal.Close()
	s.db.Close()
	half := appendEntry(nil, entry{space: "replay", key: "c", expires: exp})
	j, _ := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	j.Write(half[:len(half)-3])
	j.Close()

	s, err = Open(dir, "state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b"} {
		if ok, _ := s.Claim(ctx, "replay", []byte(k), exp); ok {
			t.Fatalf("%s lost", k)
		}
	}
	if ok, _ := s.Claim(ctx, "replay", []byte("c"), exp); !ok {
		t.Fatal("the torn record was taken as written")
	}
}

// A second process (or a second Open) on the same store fails at once.
func TestFile_SecondOpenFailsFast(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, "state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = Open(dir, "state", Options{})
	if !errors.Is(err, ErrLocked) || time.Since(start) > 5*time.Second {
		t.Fatalf("second open: %v after %s", err, time.Since(start))
	}
	other, err := Open(dir, "another-key", Options{})
	if err != nil {
		t.Fatalf("another store in the same directory: %v", err)
	}
	other.Close()
}

// kill -9 right after Claim returned loses nothing: the child claims keys
// and prints each once Claim has returned; the parent kills it mid-stream
// and finds every printed key claimed.
func TestFile_KillNineLosesNothingClaimed(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DURABLE_CRASH_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var claimed []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(claimed) < 3000 {
		claimed = append(claimed, sc.Text())
	}
	cmd.Process.Kill() // SIGKILL: no Close, no fsync
	cmd.Wait()
	if len(claimed) < 3000 {
		t.Fatalf("the child claimed only %d keys", len(claimed))
	}
	s, err := Open(dir, "state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exp := time.Now().Add(time.Hour)
	for _, k := range claimed {
		if ok, _ := s.Claim(ctx, "replay", []byte(k), exp); ok {
			t.Fatalf("key %s, claimed before the kill, is gone", k)
		}
	}
}

func crashChild(dir string) {
	s, err := Open(dir, "state", Options{JournalBytes: 16 << 10}) // fold often, mid-stream
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("DURABLE_CRASH_SWAP") != "" {
		swapChild(s)
	}
	w := bufio.NewWriter(os.Stdout)
	exp := time.Now().Add(time.Hour)
	for i := 0; ; i++ {
		k := strconv.Itoa(i)
		if ok, err := s.Claim(ctx, "replay", []byte(k), exp); !ok || err != nil {
			fmt.Fprintln(os.Stderr, "claim", k, ok, err)
			os.Exit(1)
		}
		fmt.Fprintln(w, k)
		w.Flush()
	}
}

func FuzzJournal(f *testing.F) {
	f.Add(appendEntry(nil, entry{space: "s", key: "k", value: []byte("v"), expires: time.Unix(5, 0)}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "j")
		os.WriteFile(path, data, 0o600)
		end, err := readJournal(path, func(e entry) {
			if checkEntry(e) != nil {
				t.Fatalf("an entry that could not have been written: %+v", e)
			}
		})
		if err != nil || end > int64(len(data)) {
			t.Fatalf("end %d of %d, %v", end, len(data), err)
		}
	})
}
