package relay

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what one client can make the relay do. A zero field takes the
// default documented beside it; a negative rate or count means unlimited.
type Limits struct {
	// MaxMessageBytes is the largest websocket message accepted (default
	// 256 KiB: a NIP-44 payload of 65,535 bytes inside a gift wrap is about
	// 88 KB). A larger frame closes that connection.
	MaxMessageBytes int64

	// MaxSubscriptions is the number of open subscription ids per connection
	// (default 64); MaxFilters the number of live filters across them
	// (default 256).
	MaxSubscriptions int
	MaxFilters       int

	// MaxQueryLimit caps the events one filter returns from storage
	// (default 500).
	MaxQueryLimit int

	// MaxCount caps the stored events one COUNT examines (default 10,000):
	// each is checked for whether the connection may see it, as a query's
	// are. A count that stops at the cap is answered "approximate": true
	// (NIP-45). Zero or less means the default.
	MaxCount int

	// EventsPerSecond and EventBurst form a token bucket per client IP for
	// EVENT messages (default 200/s, burst 1000).
	EventsPerSecond float64
	EventBurst      int

	// ConnectionsPerSecond and ConnectionBurst form a token bucket per client
	// IP for new websocket connections (default 10/s, burst 50).
	ConnectionsPerSecond float64
	ConnectionBurst      int

	// OutboundQueueBytes is how much may wait to be sent to one connection
	// (default 4 MiB). A broadcast that does not fit drops the connection
	// as a slow consumer at once: publishers never wait for a subscriber.
	// The connection's own answers (stored events for its REQ) wait for
	// room instead, up to SlowConsumerTimeout (default 2 s), then drop it.
	OutboundQueueBytes  int
	SlowConsumerTimeout time.Duration

	// MaxFutureSkew rejects events whose created_at is further ahead of the
	// relay's clock than this (default 15 min).
	MaxFutureSkew time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if l.MaxMessageBytes == 0 {
		l.MaxMessageBytes = 256 << 10
	}
	def(&l.MaxSubscriptions, 64)
	def(&l.MaxFilters, 256)
	def(&l.MaxQueryLimit, 500)
	if l.MaxCount <= 0 {
		// Not "unlimited": the stores size their buffers by the limit.
		l.MaxCount = 10_000
	}
	if l.EventsPerSecond == 0 {
		l.EventsPerSecond = 200
	}
	def(&l.EventBurst, 1000)
	if l.ConnectionsPerSecond == 0 {
		l.ConnectionsPerSecond = 10
	}
	def(&l.ConnectionBurst, 50)
	def(&l.OutboundQueueBytes, 4<<20)
	if l.SlowConsumerTimeout == 0 {
		l.SlowConsumerTimeout = 2 * time.Second
	}
	if l.MaxFutureSkew == 0 {
		l.MaxFutureSkew = 15 * time.Minute
	}
	return l
}

// limiter holds the per-IP token buckets.
type limiter struct {
	limits Limits
	events *keyedBuckets
	conns  *keyedBuckets
}

func newLimiter(ctx context.Context, l Limits, wg *sync.WaitGroup) *limiter {
	lm := &limiter{
		limits: l,
		events: newKeyedBuckets(l.EventsPerSecond, l.EventBurst),
		conns:  newKeyedBuckets(l.ConnectionsPerSecond, l.ConnectionBurst),
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(bucketSweepInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				lm.events.sweep(now)
				lm.conns.sweep(now)
			}
		}
	}()
	return lm
}

// bucketSweepInterval is how often idle per-IP buckets are forgotten, so that
// a stream of distinct addresses cannot grow the maps without bound.
const bucketSweepInterval = time.Minute

func (l *limiter) allowConnection(ip string) bool {
	return l.conns.allow(ip, time.Now())
}

func (l *limiter) allowEvent(ip string) bool {
	return l.events.allow(ip, time.Now())
}

// keyedBuckets is a token bucket per key. A negative rate disables it.
type keyedBuckets struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newKeyedBuckets(perSecond float64, burst int) *keyedBuckets {
	if perSecond < 0 {
		return &keyedBuckets{limit: rate.Inf}
	}
	return &keyedBuckets{limit: rate.Limit(perSecond), burst: burst, buckets: make(map[string]*bucket)}
}

func (k *keyedBuckets) allow(key string, now time.Time) bool {
	if k.limit == rate.Inf {
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(k.limit, k.burst)}
		k.buckets[key] = b
	}
	b.seen = now
	return b.lim.AllowN(now, 1)
}

// sweep forgets buckets idle long enough to have refilled completely: they
// hold no information a fresh bucket would not.
func (k *keyedBuckets) sweep(now time.Time) {
	if k.limit == rate.Inf {
		return
	}
	full := time.Duration(float64(k.burst)/float64(k.limit)*float64(time.Second)) + time.Second
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, b := range k.buckets {
		if now.Sub(b.seen) > full {
			delete(k.buckets, key)
		}
	}
}
