package gateway

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
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream opens sessions with the MCP server a Gateway exposes.
//
// Open is called once for every upstream session: once per client session in
// PerClient mode, once in Shared mode, and again after each restart. Calls
// may be concurrent. The connection is not initialized; the gateway performs
// the MCP handshake on it, and closes it when the session ends. ctx bounds
// opening only, not the life of the session.
type Upstream interface {
	Open(ctx context.Context) (mcp.Connection, error)
}

// UpstreamFunc adapts a function to Upstream: an in-process server, for
// instance, through mcp.NewInMemoryTransports.
type UpstreamFunc func(ctx context.Context) (mcp.Connection, error)

// Open calls f.
func (f UpstreamFunc) Open(ctx context.Context) (mcp.Connection, error) { return f(ctx) }

// InProcess is an Upstream for a go-sdk server in the same process: each
// upstream session is a session of s over an in-memory pipe. It puts a Go
// server on Nostr with the gateway's session handling and metrics, as cvm
// demo does.
func InProcess(s *mcp.Server) Upstream {
	return UpstreamFunc(func(ctx context.Context) (mcp.Connection, error) {
		clientEnd, serverEnd := mcp.NewInMemoryTransports()
		// The server session lives as long as the pipe, not as long as
		// the context of opening it.
		if _, err := s.Connect(context.WithoutCancel(ctx), serverEnd, nil); err != nil {
			return nil, err
		}
		return clientEnd.Connect(ctx)
	})
}

// Command is an Upstream that runs a stdio MCP server as a child process,
// one process per upstream session.
type Command struct {
	// Path is the program to run; a bare name is looked up in $PATH.
	Path string
	Args []string
	// Env is added to the gateway's own environment (KEY=VALUE entries).
	Env []string
	// Dir is the child's working directory (default: the gateway's).
	Dir string
	// Stderr receives the child's standard error. Nil discards it. The
	// last line is kept either way, for error messages.
	Stderr io.Writer
}

// terminateGrace is how long a child gets to exit after its stdin closes,
// and again after SIGTERM, before it is killed. Servers exit on end of
// input; the grace period only matters for one that does not, and a
// gateway shutting down should not wait long for it.
const terminateGrace = 2 * time.Second

// LookPath reports, before any session starts, whether Path can be run, so
// that a misspelt command fails at startup with a clear message.
func (c *Command) LookPath() error {
	if _, err := exec.LookPath(c.Path); err != nil {
		return fmt.Errorf("upstream command %q: %w", c.Path, err)
	}
	return nil
}

// Open starts the child. The child is not bound to ctx: the session owns
// it, and closing the connection stops it (stdin closed, then SIGTERM, then
// SIGKILL).
func (c *Command) Open(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(c.Path, c.Args...)
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Dir = c.Dir
	tail := &tailWriter{}
	cmd.Stderr = io.MultiWriter(orDiscard(c.Stderr), tail)
	// A child that leaves a grandchild holding stderr open would otherwise
	// make Wait, and so Close, block until the grandchild exits.
	cmd.WaitDelay = terminateGrace
	t := &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateGrace}
	conn, err := t.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	return &childConn{Connection: conn, tail: tail}, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// childConn adds to the error that closing the connection reports (the
// child's exit status) the last line the child wrote on stderr, which is
// usually the reason it exited.
type childConn struct {
	mcp.Connection
	tail *tailWriter
}

func (c *childConn) Close() error {
	err := c.Connection.Close()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if line := c.tail.lastLine(); line != "" {
			return fmt.Errorf("%w; its last words on stderr: %q", err, line)
		}
	}
	return err
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
