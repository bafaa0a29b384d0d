package contextvm

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every one that a
// Server, a ServerConn or a client connection starts ends by the time its
// Close returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
