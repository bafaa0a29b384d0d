// Command cvm puts MCP servers on open networks and lets agents use them:
// ContextVM (MCP over Nostr) and MCPx rooms.
//
// Run `cvm help` for the commands. Exit status: 0 on success, 1 when the
// remote side reported a failure, 2 on a usage or local error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	})
	stop()
	os.Exit(code)
}
