package discovery_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
)

func TestHistory_KeepsTheLastCallsOfEachServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.json")
	h := discovery.OpenHistory(path)
	pk := nostr.Generate().Public()
	t0 := time.Unix(1_700_000_000, 0)
	// 60 calls: the first 10 failed, then latencies 1..50 ms.
	for i := range 10 {
		h.Failed(pk, t0.Add(time.Duration(i)*time.Second))
	}
	for i := range 50 {
		h.Succeeded(pk, time.Duration(i+1)*time.Millisecond, t0.Add(time.Duration(10+i)*time.Second))
	}
	if n, _, _ := h.Get(pk).Stats(); n != discovery.MaxCallsPerServer {
		t.Fatalf("%d calls kept in memory, want %d", n, discovery.MaxCallsPerServer)
	}
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v, %v; want mode 0600", fi, err)
	}
	rec := discovery.OpenHistory(path).Get(pk)
	calls, ok, p50 := rec.Stats()
	if calls != discovery.MaxCallsPerServer || ok != 50 || p50 != 25*time.Millisecond {
		t.Fatalf("after 60 calls: %d calls, %d succeeded, p50 %s; want the last %d, all successes, 25ms", calls, ok, p50, discovery.MaxCallsPerServer)
	}
	if !rec.LastFailure().IsZero() || !rec.LastSuccess().Equal(t0.Add(59*time.Second)) {
		t.Fatalf("last failure %s, last success %s", rec.LastFailure(), rec.LastSuccess())
	}
}

// Two processes that opened the history at once (a proxy and a cvm call)
// both keep their calls.
func TestHistory_SavesKeepOtherProcessesCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.json")
	a, b := discovery.OpenHistory(path), discovery.OpenHistory(path)
	pa, pb := nostr.Generate().Public(), nostr.Generate().Public()
	now := time.Now()
	a.Succeeded(pa, time.Millisecond, now)
	b.Failed(pb, now)
	b.Succeeded(pa, 3*time.Millisecond, now.Add(time.Second))
	if err := a.Save(); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	h := discovery.OpenHistory(path)
	if n, ok, _ := h.Get(pa).Stats(); n != 2 || ok != 2 {
		t.Errorf("server A: %d calls, %d succeeded; want 2 and 2", n, ok)
	}
	if n, ok, _ := h.Get(pb).Stats(); n != 1 || ok != 0 {
		t.Errorf("server B: %d calls, %d succeeded; want 1 and 0", n, ok)
	}
	// Saving again adds nothing twice.
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := discovery.OpenHistory(path).Get(pa).Stats(); n != 2 {
		t.Errorf("after a second save: %d calls of A, want 2", n)
	}
}

func TestHistory_UnreadableFileIsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.json")
	for _, content := range []string{"not json", `{"zz":{"calls":[{"ok":true}]}}`, `{"lastFailure":1}`} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		h := discovery.OpenHistory(path)
		if n, _, _ := h.Get(nostr.Generate().Public()).Stats(); n != 0 {
			t.Errorf("%q: %d calls", content, n)
		}
	}
}
