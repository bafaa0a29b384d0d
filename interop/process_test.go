package interop

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
)

// startNode starts a long-running Node script from js/ (or another path
// relative to interop/), waits for its one JSON ready line and stops it when
// the test ends.
func startNode(t *testing.T, script string, env map[string]string, ready any) *lockedBuffer {
	t.Helper()
	stderr, _ := startNodeStoppable(t, script, env, ready)
	return stderr
}

// startNodeStoppable is startNode, and also returns the function that stops
// the script before the test ends: an interrupt, then a kill if it has not
// exited within 5 s. It returns once the script has exited.
func startNodeStoppable(t *testing.T, script string, env map[string]string, ready any) (*lockedBuffer, func()) {
	t.Helper()
	requireNodeModules(t)
	dir := "."
	for _, sub := range []string{"thirdparty-relay/", "payments/"} {
		if rest, ok := strings.CutPrefix(script, sub); ok {
			if sub == "payments/" {
				requirePaymentsModules(t)
			}
			dir, script = strings.TrimSuffix(sub, "/"), rest
		}
	}
	p := cvmtest.Start(t, "node", cvmtest.Options{Env: withEnv(env), Dir: dir}, script)
	stop := func() { p.Terminate(os.Interrupt, 5*time.Second) }
	t.Cleanup(stop)
	p.ReadyLine(t, ready)
	return p.Stderr, stop
}

type lockedBuffer = waitbuf.Buffer

// startThirdPartyRelay runs the @nostr-relay/core relay; tagFilters "live"
// makes it honour #p on live subscriptions, "off" leaves its default of
// ignoring them.
func startThirdPartyRelay(t *testing.T, tagFilters string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join("thirdparty-relay", "node_modules", "@nostr-relay", "core")); err != nil {
		t.Fatal("interop/thirdparty-relay/node_modules is missing; run: make interop-deps")
	}
	var ready struct{ URL string }
	startNode(t, "thirdparty-relay/relay.mjs", map[string]string{"TAG_FILTERS": tagFilters}, &ready)
	return ready.URL
}

// awaitAnnounced returns once author's events of every kind are on the
// relay, read from a live subscription: announcements are published after
// a server says it is ready.
func awaitAnnounced(t *testing.T, relayURL string, author nostr.PubKey, kinds ...nostr.Kind) {
	t.Helper()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	sub := pool.Subscribe(nostr.Filter{Authors: []nostr.PubKey{author}, Kinds: kinds}, 16)
	defer sub.Close()
	missing := map[nostr.Kind]bool{}
	for _, k := range kinds {
		missing[k] = true
	}
	timeout := time.After(testwait.Timeout(20 * time.Second))
	for len(missing) > 0 {
		select {
		case evt := <-sub.Events():
			delete(missing, evt.Kind)
		case <-timeout:
			t.Fatalf("announcements of kinds %v never reached the relay", slices.Collect(maps.Keys(missing)))
		}
	}
}
