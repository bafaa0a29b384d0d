package participant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/room"
)

// chatTexts returns the texts of from's chat messages in topic's history,
// oldest first.
func chatTexts(t *testing.T, c *Client, from string) []string {
	t.Helper()
	envs, more, err := c.History(testCtx(t), HistoryQuery{After: "0", Limit: 1000})
	if err != nil || more {
		t.Fatalf("history: more %v, %v", more, err)
	}
	var out []string
	for _, e := range slices.Backward(envs) {
		if e.From != from {
			continue
		}
		var p struct {
			Method string `json:"method"`
			Params struct {
				Text string `json:"text"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Payload, &p) == nil && p.Method == methodChat {
			out = append(out, p.Params.Text)
		}
	}
	return out
}

// Messages said one after another with SayConfirmed, faster than the
// gateway's rate: each refused with rate_limited is sent again once the
// gateway's retry_after_ms has passed, before the next one goes out. All
// of them are published, in order, each once.
func TestClient_SayConfirmedPacesItselfByTheRateLimit(t *testing.T) {
	const n = 40
	g := startGateway(t, room.Options{RatePerSecond: 100, RateBurst: 5})
	a, _ := g.client("room:x", "alice", Options{})
	var want []string
	for i := range n {
		text := fmt.Sprintf("m%02d", i)
		want = append(want, text)
		if _, err := a.SayConfirmed(testCtx(t), text, ""); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
	}
	if got := chatTexts(t, a, "alice"); !slices.Equal(got, want) {
		t.Fatalf("history holds %q, want %q", got, want)
	}
	if left := outboxEntries(a, nil); left != 0 {
		t.Fatalf("%d outbox entries left", left)
	}
}

// A message refused with rate_limited and given up (its ctx ended) before
// it was sent again is reported ErrNotSent, and it is never published:
// nothing sends it later behind the caller's back.
func TestClient_SayConfirmedGivenUpWhileHeldIsNotSent(t *testing.T) {
	g := startGateway(t, room.Options{RatePerSecond: 2, RateBurst: 1})
	a, _ := g.client("room:x", "alice", Options{})
	if _, err := a.SayConfirmed(testCtx(t), "first", ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := a.SayConfirmed(ctx, "given up", "")
		res <- err
	}()
	testwait.Eventually(t, patience, "the second message held after rate_limited", func() bool {
		return outboxEntries(a, func(e *outEntry) bool { return e.w != nil && e.w.held }) == 1
	})
	cancel()
	if err := <-res; !errors.Is(err, ErrNotSent) || !errors.Is(err, context.Canceled) {
		t.Fatalf("given up: %v, want ErrNotSent and context.Canceled", err)
	}
	// The next one goes out once the rate allows; had the one given up
	// been sent again, it would be in history before it.
	if _, err := a.SayConfirmed(testCtx(t), "third", ""); err != nil {
		t.Fatal(err)
	}
	if got := chatTexts(t, a, "alice"); !slices.Equal(got, []string{"first", "third"}) {
		t.Fatalf("history holds %q", got)
	}
}

// A message still on the wire when its ctx ends is ErrUnconfirmed: the
// gateway may publish it yet, and the client goes on watching it.
func TestClient_SayConfirmedGivenUpOnTheWireIsUnconfirmed(t *testing.T) {
	st := newStallHistory(t)
	g := startGateway(t, room.Options{History: st})
	a, _ := g.client("room:x", "alice", Options{})
	st.stall() // no commit, so no echo
	ctx, cancel := context.WithCancel(testCtx(t))
	res := make(chan error, 1)
	go func() {
		_, err := a.SayConfirmed(ctx, "stalled", "")
		res <- err
	}()
	testwait.Eventually(t, patience, "the message written", func() bool {
		return outboxEntries(a, func(e *outEntry) bool { return e.w != nil && e.written }) == 1
	})
	cancel()
	if err := <-res; !errors.Is(err, ErrUnconfirmed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("given up: %v, want ErrUnconfirmed and context.Canceled", err)
	}
	if n := outboxEntries(a, func(e *outEntry) bool { return e.w == nil }); n != 1 || outboxEntries(a, nil) != 1 {
		t.Fatalf("%d outbox entries without a waiter, of %d; want the message still watched, by the outbox alone", n, outboxEntries(a, nil))
	}
}

// outboxEntries counts c's outbox entries that satisfy pred (nil: all).
func outboxEntries(c *Client, pred func(*outEntry) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.out.entries {
		if pred == nil || pred(e) {
			n++
		}
	}
	return n
}
