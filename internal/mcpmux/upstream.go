package mcpmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrUpstream marks failures of the upstream server itself: it could not be
// started, did not answer initialize, or exited. Messages read naturally:
// "upstream MCP server exited: exit status 1".
var ErrUpstream = errors.New("upstream MCP server")

// Upstream opens connections to an MCP server.
//
// Open is called once for every upstream session, and again after each
// restart; calls may be concurrent. The connection is not initialized: the
// Link performs the MCP handshake on it, and closes it when the session
// ends. ctx bounds opening only, not the life of the connection.
type Upstream interface {
	Open(ctx context.Context) (mcp.Connection, error)
}

// UpstreamFunc adapts a function to Upstream.
type UpstreamFunc func(ctx context.Context) (mcp.Connection, error)

// Open calls f.
func (f UpstreamFunc) Open(ctx context.Context) (mcp.Connection, error) { return f(ctx) }

// OpenCommand starts cmd as a stdio MCP server and returns the connection
// to it. Its standard error goes to stderr (nil discards it); the last line
// is kept either way, and closing the connection reports the exit status
// with that line, which is usually the reason the child exited. The child
// is not bound to ctx: the connection owns it, and closing the connection
// stops it (stdin closed, then SIGTERM, then SIGKILL). It leads a process
// group of its own, and whatever it started in that group is stopped with
// it, when the connection closes and as soon as the child exits (see
// child). cmd's Stdin, Stdout, Stderr and Setpgid are set here.
//
// A cmd whose Env is nil gets this process's environment without the
// variables cvm reads secrets from (package secretenv): the server is
// another party's program. A caller that sets Env decides for itself.
func OpenCommand(ctx context.Context, cmd *exec.Cmd, stderr io.Writer) (mcp.Connection, error) {
	if cmd.Env == nil {
		cmd.Env = secretenv.Strip(os.Environ(), nil)
	}
	if stderr == nil {
		stderr = io.Discard
	}
	c, err := startChild(cmd, stderr)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	// The connection closes the child, not its stdout: Close reads what
	// is left of it first.
	t := &mcp.IOTransport{Reader: io.NopCloser(c.stdout), Writer: c}
	return t.Connect(ctx)
}

// tailWriter keeps the last bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 1024

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > tailSize {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-tailSize:]...)
	}
	return len(p), nil
}

// lastLine is the last non-blank line written.
func (w *tailWriter) lastLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(w.buf), []byte("\n"))
	return strings.TrimSpace(string(lines[len(lines)-1]))
}
