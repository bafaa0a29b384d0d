package gateway_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
)

// exited reports whether the process pid is gone (the gateway waits for
// its children, so none lingers as a zombie).
func exited(t *testing.T, pid string) bool {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("pid %q", pid)
	}
	return syscall.Kill(n, 0) != nil
}

// In per-client mode, clients without a session share one upstream, which
// holds no upstream slot; a client that initializes keeps its own.
func TestPerClient_StatelessClientsShareOneUpstream(t *testing.T) {
	b := newBench(t, gateway.Options{MaxSessions: 1})
	stateful := b.connect(nil) // young: nobody may take its slot
	own := call(t, stateful, "pid", nil)

	var shared string
	for i := range 5 {
		pid := call(t, b.connectStateless(), "pid", nil)
		switch {
		case i == 0:
			shared = pid
		case pid != shared:
			t.Fatalf("stateless client %d on upstream %s, the first on %s", i, pid, shared)
		}
	}
	if shared == own {
		t.Fatalf("stateless clients share the stateful client's upstream %s", own)
	}
	if again := call(t, stateful, "pid", nil); again != own {
		t.Fatalf("the stateful client moved from upstream %s to %s", own, again)
	}
	if n := b.metric("cvm_gateway_upstream_sessions"); n != 2 {
		t.Errorf("upstream sessions %v, want 2", n)
	}
	if n := b.metric("cvm_gateway_sessions_evicted_total") + b.metric("cvm_gateway_sessions_refused_total"); n != 0 {
		t.Errorf("%v sessions evicted or refused for stateless clients", n)
	}

	// The shared upstream declared no capabilities, as its clients did: a
	// tool that asks the client something fails at once.
	if _, err := tryCall(b.connectStateless(), "sample", map[string]any{"text": "hi"}); err == nil {
		t.Error("sampling reached a stateless client")
	}
}

// The shared upstream of stateless clients exits when the last of their
// sessions is reaped, and the next stateless client starts a new one.
func TestPerClient_StatelessUpstreamEndsWithItsLastClient(t *testing.T) {
	b := newBench(t, gateway.Options{IdleTimeout: 300 * time.Millisecond})
	cs := b.connectStateless()
	pid := call(t, cs, "pid", nil)
	testwait.Eventually(t, patience, "the shared upstream to exit", func() bool { return exited(t, pid) })
	testwait.Eventually(t, patience, "no upstream session", func() bool { return b.metric("cvm_gateway_upstream_sessions") == 0 })
	// Only the pid is compared: the new upstream may itself be reaped by the
	// time it is looked at, 300 ms after its answer on a busy machine.
	if again := call(t, b.connectStateless(), "pid", nil); again == pid {
		t.Fatalf("after the last stateless client: upstream %s, then %s", pid, again)
	}
}

// A stateless client's request when the shared upstream cannot start is
// answered with why.
func TestPerClient_StatelessUpstreamThatCannotStart(t *testing.T) {
	b := newBench(t, gateway.Options{Upstream: child("exit")})
	for range 2 { // a failed start is not remembered: each client tries again
		_, err := tryCall(b.connectStateless(), "pid", nil)
		if err == nil || !strings.Contains(err.Error(), "boom: missing configuration") {
			t.Fatalf("stateless call to an upstream that exits: %v", err)
		}
	}
}

// IsolateStateless gives each stateless client an upstream of its own.
func TestPerClient_IsolateStateless(t *testing.T) {
	b := newBench(t, gateway.Options{IsolateStateless: true})
	a, c := call(t, b.connectStateless(), "pid", nil), call(t, b.connectStateless(), "pid", nil)
	if a == c {
		t.Fatalf("two stateless clients share upstream %s", a)
	}
}
