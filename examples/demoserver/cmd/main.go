// Command demoserver runs the demo MCP server of `cvm demo` on stdin and
// stdout, for any MCP host or behind a gateway:
//
//	cvm gateway -- go run ./examples/demoserver/cmd
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Run returns when stdin closes: the host ended the session.
	if err := demoserver.New().Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "demoserver:", err)
		os.Exit(1)
	}
}
