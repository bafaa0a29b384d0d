package peertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Text string `json:"text"`
}

type whoamiOut struct {
	Pubkey string `json:"pubkey"`
}

// EchoServer builds a go-sdk server with a few tools: echo (its text
// back) and whoami (the caller's public key).
func EchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "cvm-test-server", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(ctx context.Context, req *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Return the caller's public key"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoamiOut, error) {
		pk, _ := contextvm.ClientPubkey(req)
		return nil, whoamiOut{Pubkey: pk.Hex()}, nil
	})
	return s
}

// CounterServer is EchoServer with a count tool that counts its runs in
// calls and answers the count.
func CounterServer(calls *atomic.Int64) *mcp.Server {
	s := EchoServer()
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		n := calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil, nil
	})
	return s
}

// SlowServer has a tool, wait, that says it started and waits until
// released, to hold requests in flight.
func SlowServer(release <-chan struct{}, started chan<- struct{}) *mcp.Server {
	s := EchoServer()
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	})
	return s
}

// CallEcho calls echo with text and returns what came back; it fails the
// test on an error.
func CallEcho(t testing.TB, cs *mcp.ClientSession, text string) string {
	t.Helper()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("tools/call echo: %v", err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// Call calls the tool name with args, within 20 seconds (scaled by testwait).
func Call(cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(20*time.Second))
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// RPCCode is the JSON-RPC error code err carries, 0 if none.
func RPCCode(err error) int64 {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr.Code
	}
	return 0
}
