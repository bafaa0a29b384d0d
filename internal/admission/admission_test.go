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

func TestAdmit(t *testing.T) {
	const grace = 30 * time.Second
	now := time.Unix(1_000_000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	policy := Policy{Max: 4, Reserve: 2, Grace: grace}
	for _, tc := range []struct {
		name     string
		policy   Policy
		sessions map[string]State
		known    bool
		admit    bool
		victim   string        // "" for none
		retry    time.Duration // when refused
	}{
		{"a stranger within the strangers' share", policy, map[string]State{
			"s1": {LastActive: ago(time.Second)},
		}, false, true, "", 0},
		{"a stranger beyond the strangers' share, in a table with room", policy, map[string]State{
			"s1": {LastActive: ago(time.Second)}, "s2": {LastActive: ago(10 * time.Second)},
		}, false, false, "", 20 * time.Second},
		{"a stranger beyond the share takes an idle stranger's place", policy, map[string]State{
			"s1": {LastActive: ago(time.Second)}, "s2": {LastActive: ago(time.Minute)},
		}, false, true, "s2", 0},
		{"a known key with room evicts nobody", policy, map[string]State{
			"s1": {LastActive: ago(time.Second)}, "s2": {LastActive: ago(time.Second)},
		}, true, true, "", 0},
		{"a known key in a full table: a stranger gives way however young", policy, map[string]State{
			"k1": {LastActive: ago(time.Hour), Known: true}, "k2": {LastActive: ago(time.Hour), Known: true},
			"s1": {LastActive: ago(time.Second)}, "s2": {LastActive: ago(2 * time.Second), Busy: true},
		}, true, true, "s1", 0},
		{"a known key in a full table: an idle stranger before a busy one, then the oldest", policy, map[string]State{
			"k1": {LastActive: ago(time.Second), Known: true}, "s1": {LastActive: ago(3 * time.Second)},
			"s2": {LastActive: ago(5 * time.Second)}, "s3": {LastActive: ago(time.Hour), Busy: true},
		}, true, true, "s2", 0},
		{"a known key in a table of busy strangers: one gives way anyway", policy, map[string]State{
			"k1": {LastActive: ago(time.Second), Known: true}, "k2": {LastActive: ago(time.Second), Known: true},
			"s1": {LastActive: ago(time.Second), Busy: true}, "s2": {LastActive: ago(2 * time.Second), Busy: true},
		}, true, true, "s2", 0},
		{"a known key in a table of young known keys waits", policy, map[string]State{
			"k1": {LastActive: ago(time.Second), Known: true}, "k2": {LastActive: ago(5 * time.Second), Known: true},
			"k3": {LastActive: ago(time.Second), Known: true}, "k4": {LastActive: ago(time.Second), Known: true},
		}, true, false, "", 25 * time.Second},
		{"without a reserve, strangers fill the table", Policy{Max: 4, Grace: grace}, map[string]State{
			"s1": {LastActive: ago(time.Second)}, "s2": {LastActive: ago(time.Second)}, "s3": {LastActive: ago(time.Second)},
		}, false, true, "", 0},
		{"without a reserve, a full table of young strangers refuses a stranger", Policy{Max: 2, Grace: grace}, map[string]State{
			"s1": {LastActive: ago(time.Second)}, "s2": {LastActive: ago(2 * time.Second)},
		}, false, false, "", 28 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := slices.Sorted(maps.Keys(tc.sessions))
			held := Held{Sessions: len(keys)}
			for _, st := range tc.sessions {
				if !st.Known {
					held.Unknown++
				}
			}
			d := Admit(now, tc.policy, tc.known, held, slices.Values(keys), func(k string) State { return tc.sessions[k] })
			if d.Admit != tc.admit || d.Evict != (tc.victim != "") || d.Evict && d.Victim != tc.victim || !d.Admit && d.RetryAfter != tc.retry {
				t.Fatalf("got %+v; want admit=%v victim %q retry %v", d, tc.admit, tc.victim, tc.retry)
			}
		})
	}
}

func TestResolveReserve(t *testing.T) {
	for _, tc := range []struct{ reserve, max, want int }{
		{0, 64, DefaultReserve},
		{0, 6, 3}, // a default takes at most half of a small table
		{0, 1, 0},
		{-1, 64, 0},
		{10, 64, 10},
		{100, 64, 64},
	} {
		if got := ResolveReserve(tc.reserve, tc.max); got != tc.want {
			t.Errorf("ResolveReserve(%d, %d) = %d, want %d", tc.reserve, tc.max, got, tc.want)
		}
	}
}
