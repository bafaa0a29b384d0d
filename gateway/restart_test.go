package gateway_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// flakyUpstream starts the test server the first time, fails every later
// Open until healed, then starts it again.
type flakyUpstream struct {
	opens  atomic.Int64
	mu     sync.Mutex
	healed bool
}

func (f *flakyUpstream) Open(ctx context.Context) (mcp.Connection, error) {
	n := f.opens.Add(1)
	f.mu.Lock()
	healed := f.healed
	f.mu.Unlock()
	if n == 1 || healed {
		return child("server").Open(ctx)
	}
	return nil, errors.New("the upstream is still broken")
}

func TestRestart_RequestsWhileDownAreAnsweredAndItComesBack(t *testing.T) {
	up := &flakyUpstream{}
	b := newBench(t, gateway.Options{Mode: gateway.Shared, Upstream: up, RestartMin: 40 * time.Millisecond, RestartMax: 320 * time.Millisecond})
	cs := b.connect(nil)
	if _, err := tryCall(cs, "crash", map[string]any{"code": 1}); err == nil {
		t.Fatal("crash call succeeded")
	}
	// Requests while it is down are answered at once, with the reason.
	_, err := tryCall(cs, "pid", nil)
	if err == nil || rpcError(t, err).Code != gateway.CodeUpstreamUnavailable {
		t.Fatalf("call while down: %v", err)
	}
	if rec := httptestGet(b.gw, "/healthz"); rec.Code != 503 {
		t.Errorf("healthz while down: %d %s", rec.Code, rec.Body)
	}

	// The backoff itself (doubling, capped, starting over once stable) is
	// internal/mcpmux's TestLink_BackoffDoublesAndStartsOverOnceStable, on
	// a test clock. Here: attempts go on while it is down.
	before := up.opens.Load()
	testwait.Eventually(t, patience, "another restart attempt", func() bool { return up.opens.Load() > before })

	up.mu.Lock()
	up.healed = true
	up.mu.Unlock()
	testwait.Eventually(t, patience, "the upstream to come back", func() bool { _, err := tryCall(cs, "pid", nil); return err == nil })
	if rec := httptestGet(b.gw, "/healthz"); rec.Code != 200 {
		t.Errorf("healthz after the restart: %d", rec.Code)
	}
}
