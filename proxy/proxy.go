// Package proxy makes a remote ContextVM server a local MCP server: an MCP
// host (Claude Desktop, Cursor, the MCP Inspector) talks to it over stdio as
// to any local server, and every message goes on, unchanged, to the remote
// server through relays, and back.
//
//	host ─ stdio ─ proxy ─ contextvm.ClientTransport ─ relays ─ server
//
// The proxy is no MCP session of its own: it moves JSON-RPC messages, so
// whatever the host and the server agree on (sampling, elicitation, roots,
// progress, cancellation) works through it. The client transport correlates
// answers and times requests out, answering locally with an error when the
// server stays silent.
//
// Files: proxy.go (Serve, the pipe), host.go (the host, asked to approve
// payments through elicitation), paying.go (PayingConn, for a server over
// MCP streamable HTTP that prices tools with NIP-10 quotations: it buys
// them, with a quotation.Buyer, for the calls passing through).
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure Serve.
type Options struct {
	// Remote says how to reach the ContextVM server.
	Remote contextvm.ClientOptions
	// Logger receives the proxy's logs; nil discards them. It must not
	// write to the host's transport (stdout, for stdio).
	Logger *slog.Logger
}

// Serve connects to the remote server, then serves the host's transport
// until the host ends the session (end of input) or ctx is done; both
// return nil. The remote connection is ready (subscribed on at least one
// relay) before the host's first message is read, so nothing the host sends
// can be lost to a subscription not yet in place.
func Serve(ctx context.Context, host mcp.Transport, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Remote.Logger = log
	t, err := contextvm.NewClientTransport(opts.Remote)
	if err != nil {
		return err
	}
	remote, err := t.Connect(ctx)
	if err != nil {
		return err
	}
	local, err := host.Connect(ctx)
	if err != nil {
		remote.Close()
		return fmt.Errorf("host transport: %w", err)
	}
	return Pipe(ctx, local, remote, log)
}

// Pipe moves messages both ways between local and remote until either
// side's Read fails or ctx is done, then closes both and waits for both
// directions to stop. It returns nil when local reached its end or ctx was
// done, and the first other error otherwise.
func Pipe(ctx context.Context, local, remote mcp.Connection, log *slog.Logger) error {
	return PipeHost(ctx, local, remote, log, nil)
}

// PipeHost is Pipe with host, if not nil, watching the host's messages and
// free to ask the host (Host.Confirm) while the pipe runs.
func PipeHost(ctx context.Context, local, remote mcp.Connection, log *slog.Logger, host *Host) error {
	var take func(jsonrpc.Message) bool
	if host != nil {
		host.mu.Lock()
		host.local = local
		host.mu.Unlock()
		defer close(host.done)
		take = host.fromHost
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		up  bool // local to remote
		err error
	}
	done := make(chan result, 2)
	go func() { done <- result{true, forward(ctx, local, remote, log, "to server", take)} }()
	go func() { done <- result{false, forward(ctx, remote, local, log, "to host", nil)} }()
	first := <-done
	cancel()
	local.Close()
	remote.Close()
	<-done
	switch {
	case first.err == nil, errors.Is(first.err, context.Canceled), first.up && errors.Is(first.err, io.EOF):
		return nil
	case !first.up:
		return fmt.Errorf("remote: %w", first.err)
	default:
		return fmt.Errorf("host: %w", first.err)
	}
}

// forward copies messages from one connection to the other, but those
// take takes (if not nil). A message that cannot be written is logged and
// dropped, except on a closed connection.
func forward(ctx context.Context, from, to mcp.Connection, log *slog.Logger, direction string, take func(jsonrpc.Message) bool) error {
	for {
		msg, err := from.Read(ctx)
		if err != nil {
			return err
		}
		if take != nil && take(msg) {
			continue
		}
		if log.Enabled(ctx, slog.LevelDebug) {
			log.Debug("message", "direction", direction, "message", describe(msg))
		}
		if err := to.Write(ctx, msg); err != nil {
			if errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil {
				return err
			}
			log.Warn("message not delivered", "direction", direction, "message", describe(msg), "err", err)
		}
	}
}

func describe(msg jsonrpc.Message) string {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			return fmt.Sprintf("%s #%v", m.Method, m.ID.Raw())
		}
		return m.Method
	case *jsonrpc.Response:
		if m.Error != nil {
			return fmt.Sprintf("error #%v", m.ID.Raw())
		}
		return fmt.Sprintf("result #%v", m.ID.Raw())
	}
	return fmt.Sprintf("%T", msg)
}
