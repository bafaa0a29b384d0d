package testwait

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestScale(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want float64
	}{{"", 1}, {"3", 3}, {"0.5", 0.5}, {"0", 1}, {"-2", 1}, {"x", 1}} {
		t.Setenv(ScaleEnv, tc.env)
		if got := Scale(); got != tc.want {
			t.Errorf("%s=%q: scale %g, want %g", ScaleEnv, tc.env, got, tc.want)
		}
	}
	t.Setenv(ScaleEnv, "4")
	if got := Timeout(time.Second); got != 4*time.Second {
		t.Errorf("Timeout(1s) with scale 4: %v", got)
	}
}

func TestUntil_SeesTheConditionSoon(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	if !Until(context.Background(), time.Minute, func() bool { return n.Add(1) == 3 }) {
		t.Fatal("the condition held and Until said it did not")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a condition true on the third poll took %v", d)
	}
}

func TestUntil_GivesUp(t *testing.T) {
	t.Setenv(ScaleEnv, "1")
	if Until(context.Background(), 20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported held")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Until(ctx, time.Hour, func() bool { return false }) || time.Since(start) > time.Second {
		t.Fatal("Until did not end with its context")
	}
}
