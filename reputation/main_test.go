package reputation_test

import (
	"context"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"go.uber.org/goleak"
)

// Fetching leaves nothing running once it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newPool(t testing.TB, r *relay.Server) *nostrx.Pool {
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	t.Cleanup(func() { p.Close() })
	return p
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := testwait.Context(t, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testShortContext is a deadline that is itself the behaviour under test
// (a relay that does not answer): not scaled.
func testShortContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// publishAll stores events on a relay, as fast as it takes them, each
// within its own deadline: thousands of them take minutes under the race
// detector on a busy machine.
func publishAll(t testing.TB, r *relay.Server, evts ...nostr.Event) {
	t.Helper()
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer p.Close()
	for _, e := range evts {
		ctx, cancel := testwait.Context(t, 10*time.Second)
		err := p.Publish(ctx, e)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}
