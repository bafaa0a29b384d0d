package contextvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"fiatjaf.com/nostr"
)

// Reasons an event is dropped before it is processed.
var (
	// ErrReplay means the event (or the message inside a wrap) was seen
	// before: executing it again could repeat a payment or a side effect.
	ErrReplay = errors.New("replayed event")
	// ErrStale means the event's created_at is outside the freshness window.
	ErrStale = errors.New("event outside the freshness window")
)

// DefaultFreshness is how far from now an event's created_at may be. It
// bounds how long ids must be remembered to refuse replays, and it is wide
// enough for peers whose clocks are off by minutes.
const DefaultFreshness = 10 * time.Minute

// DefaultMaxRemembered bounds the ids a replay guard remembers (about 100
// bytes each). Beyond it the oldest are forgotten first; an attacker who can
// make a peer see this many fresh events within the window could then replay
// the oldest, which the window still bounds in time.
const DefaultMaxRemembered = 200_000

// replayGuard admits each event id once while its created_at is fresh, and
// nothing stale. It remembers an id until its event would be stale anyway,
// so memory is bounded by the window and by max.
type replayGuard struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	seen  map[nostr.ID]nostr.Timestamp
	order []nostr.ID // insertion order, for forgetting
	head  int        // order[head:] are live
}

func newReplayGuard(window time.Duration, max int) *replayGuard {
	if window <= 0 {
		window = DefaultFreshness
	}
	if max <= 0 {
		max = DefaultMaxRemembered
	}
	return &replayGuard{window: window, max: max, seen: make(map[nostr.ID]nostr.Timestamp)}
}

// fresh fails with ErrStale if createdAt is outside the window around now.
func fresh(window time.Duration, createdAt nostr.Timestamp, now time.Time) error {
	t := createdAt.Time()
	if t.Before(now.Add(-window)) || t.After(now.Add(window)) {
		return fmt.Errorf("%w: created %s ago, window ±%s", ErrStale, now.Sub(t).Round(time.Second), window)
	}
	return nil
}

// admit checks the freshness of createdAt and records id; it fails with
// ErrStale or ErrReplay.
func (g *replayGuard) admit(id nostr.ID, createdAt nostr.Timestamp, now time.Time) error {
	if err := fresh(g.window, createdAt, now); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, dup := g.seen[id]; dup {
		return ErrReplay
	}
	g.forget(now)
	g.seen[id] = createdAt
	g.order = append(g.order, id)
	return nil
}

// forget drops ids whose events are stale by now, oldest first, and the
// oldest beyond max.
func (g *replayGuard) forget(now time.Time) {
	cutoff := nostr.Timestamp(now.Add(-g.window).Unix())
	for g.head < len(g.order) {
		id := g.order[g.head]
		if ts, ok := g.seen[id]; ok && ts >= cutoff && len(g.seen) < g.max {
			break
		}
		delete(g.seen, id)
		g.head++
	}
	// Compact the slice once the dead prefix dominates.
	if g.head > 1024 && g.head*2 > len(g.order) {
		g.order = append(g.order[:0], g.order[g.head:]...)
		g.head = 0
	}
}

// replaySpace is the durable.Store space of the server's executed
// requests: the ids of the message events (inside their wraps) it has
// accepted.
const replaySpace = "contextvm.executed"

// claimExecution records, in the server's durable state, that the message
// event id is being acted on: it fails with ErrReplay if it was before,
// restarts of the server included. The record lasts until the event leaves
// the freshness window, after which it is refused as stale anyway.
func (s *Server) claimExecution(ctx context.Context, evt nostr.Event) error {
	expires := evt.CreatedAt.Time().Add(s.window + time.Second)
	ok, err := s.opts.State.Claim(ctx, replaySpace, evt.ID[:], expires)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrReplay
	}
	return nil
}

// dropLevel is the level a dropped event is logged at: a duplicate is
// routine (a pool of relays delivers each event once per relay), a stale
// or forged event is worth a line.
func dropLevel(err error) slog.Level {
	if errors.Is(err, ErrReplay) {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
