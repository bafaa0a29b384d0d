package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// No figure from sessions that were not all opened, or from a heap that
// did not grow: the difference of two unsigned readings would wrap around
// (10,000 sessions asked for, 152 opened, printed 118515779667641.1 KiB
// each).
func TestPerSession_NoFigureItDidNotMeasure(t *testing.T) {
	for _, c := range []struct {
		name                  string
		before, after         uint64
		opened, asked         int
		want                  float64
		wantErr, wantInReason string
	}{
		{name: "all opened", before: 1000, after: 1000 + 3*2048, opened: 3, asked: 3, want: 2048},
		{name: "some refused", before: 1000, after: 9000, opened: 152, asked: 10_000, wantInReason: "opened 152 of the 10000"},
		{name: "heap shrank", before: 9000, after: 1000, opened: 3, asked: 3, wantInReason: "went from 9000 to 1000"},
		{name: "heap unchanged", before: 9000, after: 9000, opened: 3, asked: 3, wantInReason: "went from 9000 to 9000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := perSession(c.before, c.after, c.opened, c.asked)
			if c.wantInReason == "" {
				if err != nil || got != c.want {
					t.Fatalf("perSession = %v, %v; want %v", got, err, c.want)
				}
				return
			}
			if !errors.Is(err, errNotMeasured) || !strings.Contains(err.Error(), c.wantInReason) || got != 0 {
				t.Fatalf("perSession = %v, %v; want no figure, errNotMeasured saying %q", got, err, c.wantInReason)
			}
		})
	}
}

// The benchmark's server keeps every idle session it is asked for, many
// more than the admission limits of a server in service let throwaway keys
// open at once (a burst of 64, then 20 a second), and gives a figure.
func TestMeasureSessions_OpensEverySession(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1, ConnectionsPerSecond: -1}})
	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	const n = 500
	b, err := measureSessions(ctx, n, idleSessionOptions(r.URL, n))
	if err != nil {
		t.Fatal(err)
	}
	if b <= 0 || b > 1<<20 {
		t.Fatalf("%.0f bytes per idle session; want a size above 0 and below 1 MiB", b)
	}
	t.Logf("%d idle sessions: %.1f KiB each", n, b/1024)
}

// A server that refuses some of the sessions (here all its MaxSessions are
// taken) leaves the benchmark without a figure, which it says.
func TestMeasureSessions_NoFigureWhenSessionsAreRefused(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1, ConnectionsPerSecond: -1}})
	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	opts := idleSessionOptions(r.URL, 100)
	opts.MaxSessions = 40
	b, err := measureSessions(ctx, 100, opts)
	if !errors.Is(err, errNotMeasured) || !strings.Contains(err.Error(), "opened 40 of the 100") || b != 0 {
		t.Fatalf("measureSessions = %v, %v; want no figure, errNotMeasured saying 40 of the 100 were opened", b, err)
	}
}
