package admission

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Default rates of new sessions, overall. A new session costs a handshake
// and, behind a per-client gateway, the start of a process: tens of
// milliseconds of CPU for a small server, far more for one started by npx.
// 20 a second keeps that a fraction of a core while letting a busy server
// take on a new client every 50 ms; a burst of 64 lets every session of a
// full per-client gateway come back at once after a restart.
const (
	DefaultRate  = 20
	DefaultBurst = 64
)

// perKeyShare is the part of the overall rate and burst one key may use:
// no single key can spend the whole budget, and a client that reconnects
// a few times in a row (a script calling cvm call in a loop) is not
// slowed.
const perKeyShare = 4

// pruneAt is the size of the per-key table beyond which full buckets (keys
// that have started nothing lately) are dropped; a full bucket is the
// same as none.
const pruneAt = 1024

// Limiter bounds how fast new sessions start: overall, at a rate with a
// burst, and for each key, at a quarter of both. Its methods are safe for
// concurrent use.
type Limiter[K comparable] struct {
	overall  *rate.Limiter
	keyRate  rate.Limit
	keyBurst int

	mu       sync.Mutex
	keys     map[K]*rate.Limiter
	prunedAt int // the table's size that triggers the next pruning
}

// NewLimiter returns a limiter of perSecond new sessions with burst; a
// negative perSecond is no limit.
func NewLimiter[K comparable](perSecond float64, burst int) *Limiter[K] {
	if perSecond < 0 {
		return &Limiter[K]{}
	}
	burst = max(burst, 1)
	return &Limiter[K]{
		overall:  rate.NewLimiter(rate.Limit(perSecond), burst),
		keyRate:  rate.Limit(perSecond / perKeyShare),
		keyBurst: max(burst/perKeyShare, 1),
		keys:     make(map[K]*rate.Limiter),
		prunedAt: pruneAt,
	}
}

// Allow reports whether key may start a session at now; if not, retryAfter
// says when it may. A refused start spends nothing.
func (l *Limiter[K]) Allow(key K, now time.Time) (ok bool, retryAfter time.Duration) {
	if l.overall == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		l.prune(now)
		k = rate.NewLimiter(l.keyRate, l.keyBurst)
		l.keys[key] = k
	}
	mine := k.ReserveN(now, 1)
	if d := mine.DelayFrom(now); d > 0 {
		mine.CancelAt(now)
		return false, max(d, time.Millisecond)
	}
	all := l.overall.ReserveN(now, 1)
	if d := all.DelayFrom(now); d > 0 {
		all.CancelAt(now)
		mine.CancelAt(now)
		return false, max(d, time.Millisecond)
	}
	return true, 0
}

// prune drops the buckets that are full once the table has doubled since
// the last pruning, so that its size stays proportional to the keys that
// started sessions within the time a bucket takes to refill.
func (l *Limiter[K]) prune(now time.Time) {
	if len(l.keys) < l.prunedAt {
		return
	}
	for key, k := range l.keys {
		if k.TokensAt(now) >= float64(l.keyBurst) {
			delete(l.keys, key)
		}
	}
	l.prunedAt = max(2*len(l.keys), pruneAt)
}
