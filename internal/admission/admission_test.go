package admission

import (
	"maps"
	"slices"
	"testing"
	"time"
)

func TestVictim(t *testing.T) {
	const grace = 30 * time.Second
	now := time.Unix(1_000_000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tc := range []struct {
		name     string
		sessions map[string]State
		known    bool
		want     string        // "" for none
		retry    time.Duration // when none
	}{
		{"the least recently active idle session", map[string]State{
			"a": {LastActive: ago(time.Minute)}, "b": {LastActive: ago(2 * time.Minute)}, "c": {LastActive: ago(40 * time.Second)},
		}, false, "b", 0},
		{"never one with requests in flight", map[string]State{
			"a": {LastActive: ago(time.Hour), Busy: true}, "b": {LastActive: ago(time.Minute)},
		}, false, "b", 0},
		{"never one active within the grace period", map[string]State{
			"a": {LastActive: ago(10 * time.Second)}, "b": {LastActive: ago(25 * time.Second)},
		}, false, "", 5 * time.Second},
		{"unknown keys go first", map[string]State{
			"known": {LastActive: ago(time.Hour), Known: true}, "stranger": {LastActive: ago(time.Minute)},
		}, true, "stranger", 0},
		{"a known key gives way to a known newcomer", map[string]State{
			"known": {LastActive: ago(time.Hour), Known: true}, "stranger": {LastActive: ago(time.Second)},
		}, true, "known", 0},
		{"a known key never gives way to an unknown one", map[string]State{
			"known": {LastActive: ago(time.Hour), Known: true},
		}, false, "", grace},
		{"all busy: retry in a second", map[string]State{
			"a": {LastActive: ago(time.Hour), Busy: true},
		}, false, "", time.Second},
		{"empty", map[string]State{}, false, "", grace},
		{"never sooner than a second", map[string]State{
			"a": {LastActive: ago(29500 * time.Millisecond)},
		}, false, "", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := slices.Sorted(maps.Keys(tc.sessions))
			got, ok, retry := Victim(now, grace, tc.known, slices.Values(keys), func(k string) State { return tc.sessions[k] })
			if tc.want == "" {
				if ok || retry != tc.retry {
					t.Fatalf("victim %q ok=%v retry %v; want none, retry %v", got, ok, retry, tc.retry)
				}
				return
			}
			if !ok || got != tc.want || retry != 0 {
				t.Fatalf("victim %q ok=%v retry %v; want %q", got, ok, retry, tc.want)
			}
		})
	}
}

func TestLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := NewLimiter[string](8, 16) // a key: 2/s, burst 4
	for i := range 4 {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("start %d of a key's burst refused", i+1)
		}
	}
	ok, retry := l.Allow("a", now)
	if ok || retry != 500*time.Millisecond {
		t.Fatalf("a key beyond its burst: ok=%v retry %v; want a refusal, retry 500ms", ok, retry)
	}
	if ok, _ := l.Allow("a", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("a key's bucket does not refill")
	}
	// Other keys share the overall burst: 16, of which a took 5.
	admitted := 0
	for i := range 20 {
		if ok, _ := l.Allow(string(rune('b'+i)), now.Add(500*time.Millisecond)); ok {
			admitted++
		}
	}
	if admitted != 11+4 { // 11 left of the burst, and 4 more refilled in 500 ms
		t.Fatalf("%d of 20 new keys admitted; want 15", admitted)
	}
	if ok, retry := l.Allow("zz", now.Add(500*time.Millisecond)); ok || retry <= 0 || retry > 125*time.Millisecond {
		t.Fatalf("overall limit: ok=%v retry %v", ok, retry)
	}
}

func TestLimiter_RefusalsSpendNothing(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := NewLimiter[string](4, 4) // a key: 1/s, burst 1
	if ok, _ := l.Allow("a", now); !ok {
		t.Fatal("first start refused")
	}
	for range 10 {
		l.Allow("a", now) // refused: must not push a's next start further off
	}
	if ok, _ := l.Allow("a", now.Add(time.Second)); !ok {
		t.Fatal("refused starts were charged to the key")
	}
	// Refused by the overall limit, a key keeps its own token.
	for _, k := range []string{"b", "c", "d"} {
		l.Allow(k, now.Add(time.Second))
	}
	if ok, _ := l.Allow("e", now.Add(time.Second)); ok {
		t.Fatal("the overall burst is spent; want a refusal")
	}
	if ok, _ := l.Allow("e", now.Add(1250*time.Millisecond)); !ok {
		t.Fatal("a key refused overall lost its own token")
	}
}

func TestLimiter_TableStaysBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := NewLimiter[int](20, 64)
	for i := range 100_000 {
		l.Allow(i, now.Add(time.Duration(i)*time.Millisecond))
	}
	// Admitted keys' buckets refill in burst/rate = 16/5 s: at most the
	// keys of the last few seconds, plus one pruning's slack, remain.
	if n := len(l.keys); n > 2*pruneAt {
		t.Fatalf("%d keys remembered", n)
	}
}

func TestLimiter_Unlimited(t *testing.T) {
	l := NewLimiter[string](-1, 0)
	for range 1000 {
		if ok, _ := l.Allow("a", time.Now()); !ok {
			t.Fatal("refused without a limit")
		}
	}
}
