package admission

import (
	"iter"
	"time"
)

// DefaultGrace is how long after its last message a session is safe from
// eviction, unless configured otherwise. A client between two calls of one
// task is rarely quiet for more than a few seconds; 30 s keeps such a
// client's session while letting a table full of abandoned sessions turn
// over within half a minute.
const DefaultGrace = 30 * time.Second

// minRetry is the least wait a refusal asks for: sooner would only be
// refused again.
const minRetry = time.Second

// State is what the policy needs to know of a session.
type State struct {
	// LastActive is when its client last sent it a message.
	LastActive time.Time
	// Busy: it has requests in flight, or is still starting.
	Busy bool
	// Known: its client is on the allow-list.
	Known bool
}

// Victim picks the session that gives way to a newcomer (known: on the
// allow-list) at now, among sessions, whose states state reports. It
// considers only sessions that are not busy, have been quiet for grace,
// and are not known when the newcomer is unknown; of those, the least
// recently active unknown one, else the least recently active known one.
// When there is none, ok is false and retryAfter says when one may be.
func Victim[S any](now time.Time, grace time.Duration, known bool, sessions iter.Seq[S], state func(S) State) (victim S, ok bool, retryAfter time.Duration) {
	var best State
	retryAfter = max(grace, minRetry)
	for s := range sessions {
		st := state(s)
		if st.Known && !known {
			continue // never displaced by an unknown key
		}
		if wait := grace - now.Sub(st.LastActive); st.Busy || wait > 0 {
			retryAfter = min(retryAfter, max(wait, minRetry))
			continue
		}
		if !ok || better(st, best) {
			victim, best, ok = s, st, true
		}
	}
	if ok {
		retryAfter = 0
	}
	return victim, ok, retryAfter
}

// better reports whether a should give way before b.
func better(a, b State) bool {
	if a.Known != b.Known {
		return !a.Known
	}
	return a.LastActive.Before(b.LastActive)
}
