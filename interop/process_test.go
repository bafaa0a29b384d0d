package interop

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
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
// the script before the test ends; it returns once the script has exited.
func startNodeStoppable(t *testing.T, script string, env map[string]string, ready any) (*lockedBuffer, func()) {
	t.Helper()
	requireNodeModules(t)
	cmd := exec.Command("node", script)
	cmd.Dir = "."
	if strings.HasPrefix(script, "thirdparty-relay/") {
		cmd.Dir, cmd.Args[1] = "thirdparty-relay", strings.TrimPrefix(script, "thirdparty-relay/")
	}
	if strings.HasPrefix(script, "payments/") {
		requirePaymentsModules(t)
		cmd.Dir, cmd.Args[1] = "payments", strings.TrimPrefix(script, "payments/")
	}
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := stopper(cmd, exited)
	t.Cleanup(stop)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), ready); err != nil {
			t.Fatalf("%s: ready line %q: %v; stderr: %s", script, line, err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not ready after 30s; stderr: %s", script, stderr.String())
	}
	return &stderr, stop
}

// stopper returns the function that stops cmd, once: an interrupt, then a
// kill if it has not exited (exited is closed) within 5 s. It returns once
// cmd has exited.
func stopper(cmd *exec.Cmd, exited <-chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
	}
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
	timeout := time.After(20 * time.Second)
	for len(missing) > 0 {
		select {
		case evt := <-sub.Events():
			delete(missing, evt.Kind)
		case <-timeout:
			t.Fatalf("announcements of kinds %v never reached the relay", slices.Collect(maps.Keys(missing)))
		}
	}
}
