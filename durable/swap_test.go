package durable

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// swappers runs f against each implementation, as a Swapper.
func swappers(t *testing.T, opts Options, f func(t *testing.T, s Swapper)) {
	stores(t, opts, func(t *testing.T, s Store) { f(t, s.(Swapper)) })
}

// Swap changes a record only from what it holds: nothing (or an expired
// record) for a nil old, the very bytes otherwise.
func TestStore_SwapOnlyFromWhatIsThere(t *testing.T) {
	c := &clock{now: time.Unix(1_000_000, 0)}
	swappers(t, Options{Now: c.Now}, func(t *testing.T, s Swapper) {
		k, exp := []byte("ch"), c.Now().Add(time.Minute)
		swap := func(old, value string, oldNil bool) bool {
			t.Helper()
			o := []byte(old)
			if oldNil {
				o = nil
			}
			ok, err := s.Swap(ctx, "channel", k, o, []byte(value), exp)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !swap("", "v1", true) {
			t.Fatal("swap into an absent record refused")
		}
		if swap("", "v1b", true) {
			t.Fatal("swap from absent over a live record")
		}
		if swap("v0", "v2", false) {
			t.Fatal("swap from a value the record does not hold")
		}
		if !swap("v1", "v2", false) {
			t.Fatal("swap from the value held refused")
		}
		if v, ok, _ := s.Get(ctx, "channel", k); !ok || string(v) != "v2" {
			t.Fatalf("after the swaps: %q %v; want v2", v, ok)
		}
		if ok, _ := s.Swap(ctx, "other", k, []byte("v2"), []byte("x"), exp); ok {
			t.Fatal("spaces are not separate")
		}
		c.add(time.Minute) // v2 has expired
		if swap("v2", "v3", false) {
			t.Fatal("swap from an expired record's value")
		}
		if !swap("", "v3", true) {
			t.Fatal("swap from absent over an expired record refused")
		}
		// A claim's record has an empty value: a non-nil empty old.
		claimed, exp := []byte("claimed"), c.Now().Add(time.Minute)
		if ok, _ := s.Claim(ctx, "channel", claimed, exp); !ok {
			t.Fatal("claim")
		}
		if ok, _ := s.Swap(ctx, "channel", claimed, nil, []byte("x"), exp); ok {
			t.Fatal("a claim's record taken for absent")
		}
		if ok, _ := s.Swap(ctx, "channel", claimed, []byte{}, []byte("x"), exp); !ok {
			t.Fatal("a claim's record not matched by an empty old")
		}
	})
}

// Callers racing to change one record by read, change, swap (a counter)
// lose no change: each swap from one value has one winner.
func TestStore_SwapRacersLoseNoChange(t *testing.T) {
	swappers(t, Options{}, func(t *testing.T, s Swapper) {
		const racers, each = 8, 200
		exp := time.Now().Add(time.Hour)
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				for range each {
					if _, err := increment(s, exp); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if n := counter(t, s); n != racers*each {
			t.Fatalf("counter %d after %d increments", n, racers*each)
		}
	})
}

// increment adds one to the counter record by read and swap, again until
// its swap wins, and returns the value it wrote.
func increment(s Swapper, exp time.Time) (uint64, error) {
	for {
		old, ok, err := s.Get(ctx, "counter", []byte("n"))
		if err != nil {
			return 0, err
		}
		var n uint64
		if ok {
			n = binary.LittleEndian.Uint64(old)
		} else {
			old = nil
		}
		swapped, err := s.Swap(ctx, "counter", []byte("n"), old, binary.LittleEndian.AppendUint64(nil, n+1), exp)
		if err != nil || swapped {
			return n + 1, err
		}
	}
}

func counter(t *testing.T, s Store) uint64 {
	t.Helper()
	v, ok, err := s.Get(ctx, "counter", []byte("n"))
	if err != nil || !ok || len(v) != 8 {
		t.Fatalf("counter: %x %v %v", v, ok, err)
	}
	return binary.LittleEndian.Uint64(v)
}

// kill -9 right after Swap returned loses nothing swapped: the child
// counts up by swaps and prints each value once its Swap has returned; the
// parent kills it mid-stream and finds the counter at least at the last
// value it read (the child runs on until the kill), and Close and Open
// keep what is swapped next.
func TestFile_KillNineLosesNothingSwapped(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DURABLE_CRASH_CHILD="+dir, "DURABLE_CRASH_SWAP=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last string
	sc := bufio.NewScanner(out)
	for n := 0; n < 3000 && sc.Scan(); n++ {
		last = sc.Text()
	}
	cmd.Process.Kill() // SIGKILL: no Close, no fsync
	cmd.Wait()
	if last != "3000" {
		t.Fatalf("the child counted to %q only", last)
	}
	s, err := Open(dir, "state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(t, s); n < 3000 {
		t.Fatalf("counter %d after the kill; the child had swapped it to 3000", n)
	}
	n, err := increment(s, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, "state", Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := counter(t, s); got != n {
		t.Fatalf("counter %d after Close and Open; %d was swapped in", got, n)
	}
}

// swapChild counts up by swaps until it is killed, printing each value
// once its swap has returned.
func swapChild(s *File) {
	w := bufio.NewWriter(os.Stdout)
	exp := time.Now().Add(time.Hour)
	for {
		n, err := increment(s, exp)
		if err != nil {
			fmt.Fprintln(os.Stderr, "swap", err)
			os.Exit(1)
		}
		fmt.Fprintln(w, n)
		w.Flush()
	}
}
