package room

import (
	"testing"

	"github.com/coder/websocket"
)

// The kill -9 tests (kill_test.go) are in package room_test: they publish
// with roomtest.Publisher, and roomtest imports room. These give them the
// gateway processes of crash_test.go.

// ChildGateway is a "cvm room serve" process a test started.
type ChildGateway = childGateway

// StartChildGateway is startChildGateway.
func StartChildGateway(t *testing.T, dir string, extra ...string) *ChildGateway {
	t.Helper()
	return startChildGateway(t, dir, extra...)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (c *childGateway) Kill() { c.kill() }

// Stderr is what the process logged.
func (c *childGateway) Stderr() string { return c.stderr.String() }

// Dial connects participant id to topic and reads its welcome.
func (c *childGateway) Dial(t *testing.T, keys *Keys, topic, id string) *websocket.Conn {
	t.Helper()
	return dialChild(t, c, keys, topic, id)
}

// History reads topic's whole history as reader: seq -> envelope id.
func (c *childGateway) History(t *testing.T, keys *Keys, topic, reader string) map[uint64]string {
	t.Helper()
	return childHistory(t, c, keys, topic, reader)
}
