package contextvm

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// fakePool is a relay pool without relays: it records what is published
// and answers each publish after latency, or when block says so. Nothing
// subscribes through it.
type fakePool struct {
	latency time.Duration
	// block, if set, makes a publish wait until ctx ends.
	block bool

	mu        sync.Mutex
	published []nostr.Event
}

func (p *fakePool) Publish(ctx context.Context, evt nostr.Event) error {
	p.mu.Lock()
	p.published = append(p.published, evt)
	p.mu.Unlock()
	if p.block {
		<-ctx.Done()
		return ctx.Err()
	}
	if p.latency > 0 {
		t := time.NewTimer(p.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (p *fakePool) SubscribeFilters([]nostr.Filter, int) *nostrx.Subscription {
	panic("fakePool: nothing subscribes in these tests")
}

func (p *fakePool) Query(context.Context, nostr.Filter) ([]nostr.Event, error) { return nil, nil }
func (p *fakePool) Relays() []string                                           { return nil }
func (p *fakePool) Close() error                                               { return nil }

// count is the number of events published.
func (p *fakePool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.published)
}

// testEndpoint is an endpoint with a fresh key, publishing into pool.
func testEndpoint(t testing.TB, pool relayPool) endpoint {
	t.Helper()
	sk := nostr.Generate()
	return endpoint{pool: pool, signer: NewKeySigner(sk), me: sk.Public(), log: slog.New(slog.DiscardHandler)}
}
