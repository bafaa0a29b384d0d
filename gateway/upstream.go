package gateway

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/cvmgo/cvm/internal/mcpmux"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream opens sessions with the MCP server a Gateway exposes.
//
// Open is called once for every upstream session: once per client session in
// PerClient mode, once in Shared mode, and again after each restart. Calls
// may be concurrent. The connection is not initialized; the gateway performs
// the MCP handshake on it, and closes it when the session ends. ctx bounds
// opening only, not the life of the session.
type Upstream = mcpmux.Upstream

// UpstreamFunc adapts a function to Upstream: an in-process server, for
// instance, through mcp.NewInMemoryTransports.
type UpstreamFunc = mcpmux.UpstreamFunc

// ErrUpstream marks failures of the upstream server itself: it could not be
// started, did not answer initialize, or exited. Messages read naturally:
// "upstream MCP server exited: exit status 1".
var ErrUpstream = mcpmux.ErrUpstream

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
	// Env is added to the child's environment (KEY=VALUE entries), which
	// is the gateway's own without the variables cvm reads secrets from
	// ($CVM_SECRET_KEY, $CVM_WALLET: see package internal/secretenv). The
	// child is a third party's program: with the wallet it could spend,
	// with the key sign as the server.
	Env []string
	// PassEnv names secret variables of the gateway's environment that
	// the child gets anyway.
	PassEnv []string
	// Dir is the child's working directory (default: the gateway's).
	Dir string
	// Stderr receives the child's standard error. Nil discards it. The
	// last line is kept either way, for error messages.
	Stderr io.Writer
}

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
// SIGKILL) and reports its exit status with its last line on stderr.
func (c *Command) Open(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(secretenv.Strip(os.Environ(), c.PassEnv), c.Env...)
	cmd.Dir = c.Dir
	return mcpmux.OpenCommand(ctx, cmd, c.Stderr)
}
