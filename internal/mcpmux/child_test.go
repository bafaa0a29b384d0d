//go:build unix

package mcpmux

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

func TestOpenCommand_CloseStopsWhatTheServerStarted(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		// cat exits at the end of its input; sleep is left to SIGTERM.
		{"exits on end of input", `sleep 60 & exec cat`},
		// Nothing exits before SIGKILL.
		{"ignores SIGTERM", `trap '' TERM; (exec sleep 60) & sleep 60`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, held := openScript(t, tc.script)
			start := time.Now()
			conn.Close()
			// Close returns once the group is gone, so the pipe is at
			// its end at once.
			awaitEOF(t, held, 100*time.Millisecond)
			t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// A server that exits by itself (a wrapper such as npx, killed) takes
// what it started with it at once, before anyone closes the connection;
// the pipes close and the reader sees the end.
func TestOpenCommand_ServerExitStopsItsGroup(t *testing.T) {
	conn, held := openScript(t, `trap '' TERM; (exec sleep 60) & echo 'boom: bad config' >&2; exit 3`)
	awaitEOF(t, held, 10*time.Second)
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if _, err := conn.Read(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read after the server exited: %v, want the end of the connection", err)
	}
	err := conn.Close()
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), `"boom: bad config"`) {
		t.Fatalf("close: %v; want the exit status and the last line on stderr", err)
	}
}
