package contextvm

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"fiatjaf.com/nostr"
)

// A duplicate is routine (every relay of a pool may deliver an event, and
// a pool's memory of ids is bounded) and is logged at debug; an event
// dropped for another reason is worth a line at info.
func TestReplayGuard_DuplicatesAreDebug(t *testing.T) {
	g := newReplayGuard(time.Minute, 0)
	now := time.Now()
	id := nostr.ID{1}
	if err := g.admit(id, nostr.Timestamp(now.Unix()), now); err != nil {
		t.Fatal(err)
	}
	dup := g.admit(id, nostr.Timestamp(now.Unix()), now)
	stale := g.admit(nostr.ID{2}, nostr.Timestamp(now.Add(-time.Hour).Unix()), now)
	for _, tc := range []struct {
		err  error
		want slog.Level
	}{{dup, slog.LevelDebug}, {stale, slog.LevelInfo}, {fmt.Errorf("wrapped: %w", dup), slog.LevelDebug}} {
		if tc.err == nil {
			t.Fatal("the guard admitted a duplicate or a stale event")
		}
		if got := dropLevel(tc.err); got != tc.want {
			t.Errorf("%v logged at %v, want %v", tc.err, got, tc.want)
		}
	}
}
