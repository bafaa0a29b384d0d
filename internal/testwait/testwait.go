// Package testwait is how the project's tests wait: on the condition they
// check, polled, never on a clock alone; and where a deadline is essential,
// a generous one scaled by one knob.
//
// The knob is the environment variable CVM_TEST_TIMEOUT_SCALE, a positive
// number (default 1) that multiplies every deadline given to Timeout,
// Context and Eventually: a machine slower than the ones the deadlines were
// written on (a shared CI runner, -race under load, an emulator) raises it
// instead of each test being tuned. A deadline only bounds how long a
// failing test takes to say so; a passing test never waits for one.
package testwait

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// ScaleEnv names the variable that scales every deadline.
const ScaleEnv = "CVM_TEST_TIMEOUT_SCALE"

// Scale is the factor deadlines are multiplied by: CVM_TEST_TIMEOUT_SCALE
// when it is a positive number, else 1.
func Scale() float64 {
	if f, err := strconv.ParseFloat(os.Getenv(ScaleEnv), 64); err == nil && f > 0 {
		return f
	}
	return 1
}

// Timeout is d scaled by Scale.
func Timeout(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Scale())
}

// Context returns a context that ends after Timeout(d), or with the test.
func Context(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), Timeout(d))
	t.Cleanup(cancel)
	return ctx, cancel
}

// Eventually polls cond until it holds, and fails the test, naming what it
// waited for, when it does not within Timeout(d). It polls often at first,
// then every 50 ms, so a condition that holds soon is seen soon and one
// that takes long costs little.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(t.Context(), d, cond) {
		t.Fatalf("waited %v (%v × %s=%g) for %s", Timeout(d), d, ScaleEnv, Scale(), what)
	}
}

// Until polls cond until it holds (true), Timeout(d) passes or ctx ends
// (false). For a test that must not stop where it waits, e.g. in a
// goroutine, or that reports the failure itself.
func Until(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(Timeout(d))
	pause := time.Millisecond
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return cond()
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
