package peertest

import (
	"context"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve starts a ContextVM server for mcpServer (a fresh key unless opts
// has a Signer), closed when the test ends.
func Serve(t testing.TB, opts contextvm.ServerOptions, mcpServer *mcp.Server) *contextvm.Server {
	t.Helper()
	if opts.Signer == nil {
		opts.Signer = contextvm.NewKeySigner(nostr.Generate())
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), mcpServer)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// Connect connects a go-sdk client through a ContextVM client transport
// of opts, closed when the test ends.
func Connect(t testing.TB, opts contextvm.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvm-test-client", Version: "0.1.0"}, nil), opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
