//lint:file-ignore SA1019 the test servers ask for sampling and roots, deprecated (SEP-2577) but still relayed
package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as the upstream MCP server: started with
// childEnv set, TestMain runs one of these instead of the tests.
const childEnv = "CVM_GATEWAY_TEST_CHILD"

func runChild(mode string) int {
	switch mode {
	case "server":
		ctx := context.Background()
		if err := testServer().Run(ctx, &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	case "early":
		return earlyChild()
	case "exit":
		fmt.Fprintln(os.Stderr, "starting up")
		fmt.Fprintln(os.Stderr, "boom: missing configuration")
		return 3
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

const testInstructions = "a test server behind a gateway"

// testServer is the upstream of most gateway tests. Its tools expose what
// the tests need to see from the upstream's side.
func testServer() *mcp.Server {
	var subscribes, unsubscribes, cancelled atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "gateway-test-upstream", Version: "0.1.0"}, &mcp.ServerOptions{
		Instructions: testInstructions,
		SubscribeHandler: func(context.Context, *mcp.SubscribeRequest) error {
			subscribes.Add(1)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error {
			unsubscribes.Add(1)
			return nil
		},
	})
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "the upstream's process id"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(strconv.Itoa(os.Getpid())), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "session", Description: "the upstream's session id"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return text(req.Session.ID()), nil, nil
	})
	type crashIn struct {
		Code int `json:"code"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "exit at once, answering nothing"}, func(_ context.Context, _ *mcp.CallToolRequest, in crashIn) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "crashing on request")
		os.Exit(in.Code)
		return nil, nil, nil
	})
	type slowIn struct {
		Ms    int `json:"ms,omitempty"`
		Steps int `json:"steps,omitempty"`
		// Started asks for a progress notification (progress 0) as soon
		// as the call runs: the tests' proof that it is in flight here.
		Started bool `json:"started,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil && in.Started {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 0, Message: "started"})
		}
		steps := max(in.Steps, 1)
		for i := 1; i <= steps; i++ {
			select {
			case <-time.After(time.Duration(in.Ms/steps) * time.Millisecond):
			case <-ctx.Done():
				cancelled.Add(1)
				return nil, nil, ctx.Err()
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(steps)})
			}
		}
		return text("done"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "ask the client's model"}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Text}}},
			MaxTokens: 10,
		})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		return text(res.Content.(*mcp.TextContent).Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Description: "list the client's roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		b, _ := json.Marshal(res.Roots)
		return text(string(b)), nil, nil
	})
	type uriIn struct {
		URI string `json:"uri"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "report a resource as updated"}, func(ctx context.Context, _ *mcp.CallToolRequest, in uriIn) (*mcp.CallToolResult, any, error) {
		s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI})
		return text("touched"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "subs", Description: "subscribe and unsubscribe requests received"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("subscribe=%d unsubscribe=%d", subscribes.Load(), unsubscribes.Load())), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "cancelled", Description: "slow calls cancelled so far"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(strconv.FormatInt(cancelled.Load(), 10)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "add a tool (the upstream announces list_changed)"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: fmt.Sprintf("extra_%d", time.Now().UnixNano())}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text("extra"), nil, nil
		})
		return text("added"), nil, nil
	})
	for _, uri := range []string{"test://a", "test://b"} {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "content of " + req.Params.URI}}}, nil
		})
	}
	return s
}

// earlyChild is a raw stdio server that announces list_changed and a log
// message before it answers initialize, as some servers do.
func earlyChild() int {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		var result any = map[string]any{}
		switch req.Method {
		case "initialize":
			out.Encode(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
			out.Encode(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "early bird"}})
			result = map[string]any{
				"protocolVersion": "2025-11-25",
				"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}, "logging": map[string]any{}},
				"serverInfo":      map[string]any{"name": "early", "version": "1"},
			}
		case "tools/list":
			result = map[string]any{"tools": []any{}}
		}
		out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	return 0
}
