package admission

import (
	"iter"
	"time"
)

// DefaultReserve is how many sessions of a table with an allow-list only
// known keys may take, unless configured otherwise. A few: an allow-list
// names a handful of clients, each of which holds one session at a time
// (two for a moment while it starts a new one), and the reserve is what
// lets them in without evicting anyone while strangers hold the rest.
const DefaultReserve = 4

// ResolveReserve turns a configured reserve into the one a table of max
// sessions keeps: zero takes DefaultReserve, but at most half of max (a
// small table is not closed to strangers by a default); negative keeps
// none; more than max is max.
func ResolveReserve(reserve, max int) int {
	switch {
	case reserve < 0:
		return 0
	case reserve == 0:
		return min(DefaultReserve, max/2)
	}
	return min(reserve, max)
}

// Policy is how a table of sessions bounded in size admits newcomers.
type Policy struct {
	// Max is how many sessions the table holds at once.
	Max int
	// Reserve is how many of them only known keys may hold: unknown keys
	// hold at most Max−Reserve between them. It is zero where there is no
	// allow-list, since every key is then unknown.
	Reserve int
	// Grace is how long after its last message a session is safe from
	// being evicted for a newcomer of its own kind (see Victim).
	Grace time.Duration
}

// Held is what a table holds: its sessions, and how many of them are
// unknown keys'.
type Held struct {
	Sessions, Unknown int
}

// Decision is what Admit decided.
type Decision[S any] struct {
	// Admit: the newcomer gets a session, once Victim (with Evict) has
	// given way.
	Admit  bool
	Evict  bool
	Victim S
	// RetryAfter, when the newcomer is refused, says when a session may
	// be free.
	RetryAfter time.Duration
}

// Admit decides whether a newcomer (known: on the allow-list) gets a
// session at now in a table that holds held, of which sessions yields
// every session and state reports their states.
//
// An unknown newcomer is admitted while unknown keys hold fewer than
// Max−Reserve sessions and the table has room, and otherwise only in
// place of a session Victim picks for it, which is never a known key's.
// A known newcomer is admitted while the table has room; in a full table,
// an unknown key's session gives way to it whatever its state (one with
// nothing in flight, least recently active, first), so that a known key
// is never refused for room unknown keys hold; only in a table of known
// keys alone does it wait, like anyone, for a session Victim picks.
func Admit[S any](now time.Time, p Policy, known bool, held Held, sessions iter.Seq[S], state func(S) State) Decision[S] {
	overShare := !known && p.Reserve > 0 && held.Unknown >= p.Max-p.Reserve
	if !overShare && held.Sessions < p.Max {
		return Decision[S]{Admit: true}
	}
	if known && held.Unknown > 0 {
		if v, ok := leastMissed(sessions, state); ok {
			return Decision[S]{Admit: true, Evict: true, Victim: v}
		}
	}
	v, ok, retry := Victim(now, p.Grace, known, sessions, state)
	if !ok {
		return Decision[S]{RetryAfter: retry}
	}
	return Decision[S]{Admit: true, Evict: true, Victim: v}
}

// leastMissed is the unknown key's session whose loss its client would
// notice least: one with nothing in flight before a busy one, then the
// least recently active.
func leastMissed[S any](sessions iter.Seq[S], state func(S) State) (victim S, ok bool) {
	var best State
	for s := range sessions {
		st := state(s)
		if st.Known {
			continue
		}
		idler := best.Busy && !st.Busy
		older := st.Busy == best.Busy && st.LastActive.Before(best.LastActive)
		if !ok || idler || older {
			victim, best, ok = s, st, true
		}
	}
	return victim, ok
}
