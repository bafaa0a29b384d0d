package mcpmux

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordingHandler notes when each connection went down and came back.
type recordingHandler struct {
	mu        sync.Mutex
	downs     []error
	restarted chan uint64
}

func (h *recordingHandler) FromUpstream(uint64, jsonrpc.Message) {}
func (h *recordingHandler) UpstreamDown(_ uint64, why error) {
	h.mu.Lock()
	h.downs = append(h.downs, why)
	h.mu.Unlock()
}
func (h *recordingHandler) UpstreamRestarted(gen uint64, _ json.RawMessage) { h.restarted <- gen }

// The backoff between restart attempts doubles from RestartMin to
// RestartMax, each wait jittered within its upper half, and starts over
// once a restarted upstream has stayed up for StableAfter. In a synctest
// bubble the clock is the test's, so the waits are checked exactly rather
// than counted over a second of real time.
func TestLink_BackoffDoublesAndStartsOverOnceStable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := newTestUpstream(t)
		var mu sync.Mutex
		var opens []time.Time
		up := UpstreamFunc(func(ctx context.Context) (mcp.Connection, error) {
			mu.Lock()
			opens = append(opens, time.Now())
			mu.Unlock()
			return u.Open(ctx)
		})
		const (
			min    = 100 * time.Millisecond
			max    = 800 * time.Millisecond
			stable = 10 * time.Second
		)
		l, _, err := OpenLink(context.Background(), LinkOptions{Upstream: up, Params: initParams(),
			Initialized: true, RestartMin: min, RestartMax: max, StableAfter: stable})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		h := &recordingHandler{restarted: make(chan uint64, 4)}
		l.Start(h, nil)

		// Down, and broken for six attempts: the waits before the seven
		// attempts are bounded by 100, 200, 400, then 800 ms.
		u.failN.Store(6)
		mu.Lock()
		opens = []time.Time{time.Now()} // the moment it goes down
		mu.Unlock()
		u.kill()
		if gen := <-h.restarted; gen != 2 {
			t.Fatalf("restarted as generation %d", gen)
		}
		mu.Lock()
		waits := gaps(opens)
		mu.Unlock()
		checkWaits(t, waits, []time.Duration{min, 2 * min, 4 * min, max, max, max, max})

		// Up for longer than StableAfter: the next restart starts over.
		time.Sleep(stable) // synctest clock: up for StableAfter
		mu.Lock()
		opens = []time.Time{time.Now()}
		mu.Unlock()
		u.failN.Store(1)
		u.kill()
		<-h.restarted
		mu.Lock()
		waits = gaps(opens)
		mu.Unlock()
		checkWaits(t, waits, []time.Duration{min, 2 * min})
		if len(h.downs) != 2 || !strings.Contains(h.downs[0].Error(), "upstream MCP server") {
			t.Fatalf("downs: %v", h.downs)
		}
	})
}

// gaps are the intervals between successive times.
func gaps(times []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(times); i++ {
		out = append(out, times[i].Sub(times[i-1]))
	}
	return out
}

// checkWaits checks each wait against its backoff b: a jittered wait is in
// [b/2, b].
func checkWaits(t *testing.T, waits, bounds []time.Duration) {
	t.Helper()
	if len(waits) != len(bounds) {
		t.Fatalf("%d waits %v; want %d", len(waits), waits, len(bounds))
	}
	for i, w := range waits {
		if b := bounds[i]; w < b/2 || w > b {
			t.Errorf("wait %d was %s; want within [%s, %s] (all: %v)", i+1, w, b/2, b, waits)
		}
	}
}

func initParams() json.RawMessage {
	return json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
}

func TestDescribeEnd(t *testing.T) {
	if err := describeEnd(nil, nil); !strings.Contains(err.Error(), "upstream MCP server closed the connection") {
		t.Errorf("%v", err)
	}
}
