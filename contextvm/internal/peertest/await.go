package peertest

import (
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

// Notifier tells waiters that something changed: a tap saw an event, a
// log line was written. Its zero value is ready.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns a channel closed at the next Notify.
func (n *Notifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes the waiters.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// Await waits until cond holds, checking it again at each change n
// reports, and fails the test if that takes more than ten seconds.
func Await(t testing.TB, what string, n *Notifier, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testwait.Timeout(10 * time.Second))
	defer deadline.Stop()
	for {
		changed := n.Changed() // before the check: a change during it is not missed
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
