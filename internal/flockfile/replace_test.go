package flockfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the writer process of these tests.
func TestMain(m *testing.M) {
	if path := os.Getenv("FLOCKFILE_WRITER"); path != "" {
		if limit, err := strconv.ParseUint(os.Getenv("FLOCKFILE_FSIZE"), 10, 64); err == nil {
			// A disk that fills up mid-write: a write past limit bytes
			// fails part-way and SIGXFSZ kills the writer.
			if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		writer(path, os.Getenv("FLOCKFILE_PREFIX"), os.Getenv("FLOCKFILE_COUNT"))
		return
	}
	os.Exit(m.Run())
}

// appendEntry adds one entry to the JSON list in path, under Replace.
func appendEntry(path, entry string) error {
	return Replace(context.Background(), path, 0o600, time.Minute, func(old []byte) ([]byte, error) {
		var list []string
		if old != nil {
			if err := json.Unmarshal(old, &list); err != nil {
				return nil, fmt.Errorf("the file is not whole: %w (%d bytes)", err, len(old))
			}
		}
		return json.Marshal(append(list, entry))
	})
}

// writer appends prefix0, prefix1, … to path (count of them, or without end
// when count is empty), printing each once Replace has returned.
func writer(path, prefix, count string) {
	n, err := strconv.Atoi(count)
	if err != nil {
		n = -1
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; i != n; i++ {
		entry := prefix + strconv.Itoa(i)
		if err := appendEntry(path, entry); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintln(w, entry)
		w.Flush()
	}
}

func readList(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("%s is not whole: %v (%d bytes)", path, err, len(data))
	}
	return list
}

func writerCommand(path, prefix, count string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLOCKFILE_WRITER="+path, "FLOCKFILE_PREFIX="+prefix, "FLOCKFILE_COUNT="+count)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Processes and goroutines appending to one file at once lose no entry:
// each read-modify-write is one transaction under the lock.
func TestReplace_ConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	const perWriter = 40
	var want []string
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for p := range 2 {
		prefix := fmt.Sprintf("proc%d-", p)
		for i := range perWriter {
			want = append(want, prefix+strconv.Itoa(i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := writerCommand(path, prefix, strconv.Itoa(perWriter)).Output(); err != nil {
				errs <- fmt.Errorf("writer %s: %w; printed %q", prefix, err, out)
			}
		}()
	}
	for g := range 2 {
		prefix := fmt.Sprintf("goroutine%d-", g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if err := appendEntry(path, prefix+strconv.Itoa(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
		for i := range perWriter {
			want = append(want, prefix+strconv.Itoa(i))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := readList(t, path)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d entries in the file, want %d", len(got), len(want))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v (%v), want 0600", fi.Mode(), err)
	}
}

// kill -9 at any point of a stream of Replaces leaves the file whole, with
// every entry whose Replace had returned: the writer is killed several
// times, each time mid-stream, and a new one carries on.
func TestReplace_KillNineLeavesTheFileWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	var acked []string
	for round := range 3 {
		cmd := writerCommand(path, fmt.Sprintf("r%d-", round), "")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for n := 0; n < 100 && sc.Scan(); n++ {
			acked = append(acked, sc.Text())
		}
		cmd.Process.Kill() // SIGKILL: wherever the writer is
		cmd.Wait()
		got := readList(t, path)
		for _, e := range acked {
			if !slices.Contains(got, e) {
				t.Fatalf("round %d: entry %s, written before the kill, is gone", round, e)
			}
		}
	}
}

// A writer that dies part-way through a write (here the disk is full: the
// file size limit is reached mid-write) leaves the file as the last
// complete Replace left it, with every entry it acknowledged. Written in
// place, the file would be cut at the limit, half a list.
func TestReplace_DeathMidWriteLeavesTheLastWholeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	cmd := writerCommand(path, "entry-with-some-length-", "", "FLOCKFILE_FSIZE=4000")
	cmd.Stderr = nil
	out, err := cmd.Output()
	if err == nil {
		t.Fatal("the writer never reached the size limit")
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	var acked []string
	for sc.Scan() {
		acked = append(acked, sc.Text())
	}
	got := readList(t, path)
	if len(acked) == 0 || !slices.Equal(got, acked) {
		t.Fatalf("the file holds %d entries, the writer acknowledged %d", len(got), len(acked))
	}
}

// A file held stays locked across its writes: another holder waits, and
// gets it once the first closes.
func TestHold_LocksAcrossWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.json")
	ctx := context.Background()
	h, err := Hold(ctx, path, 0o600, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Write([]byte(`["a"]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Hold(ctx, path, 0o600, 20*time.Millisecond); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("a second Hold while the first holds the file: %v, want ErrLockTimeout", err)
	}
	if err := h.Write([]byte(`["a","b"]`)); err != nil {
		t.Fatal(err)
	}
	h.Close()
	h2, err := Hold(ctx, path, 0o600, time.Second)
	if err != nil {
		t.Fatalf("Hold after Close: %v", err)
	}
	defer h2.Close()
	if data, err := h2.Read(); err != nil || string(data) != `["a","b"]` {
		t.Fatalf("read %q, %v", data, err)
	}
}
