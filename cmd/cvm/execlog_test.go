package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// execLogEnv, when set to a file name, makes the test binary a stdio MCP
// server instead of running tests (see TestMain): each execution of its
// tools appends the call's request id to that file, one line each, so that
// a test counts how many times every request ran, across processes.
const execLogEnv = "CVM_TEST_EXECLOG"

// execReplicaEnv, inherited from the gateway that started the server,
// names that gateway in each line: "RID REPLICA".
const execReplicaEnv = "CVM_TEST_REPLICA"

// execStartDelayEnv, a duration, makes the server wait that long before it
// reads its first message: a cold upstream, such as an npx package
// fetched on first use.
const execStartDelayEnv = "CVM_TEST_START_DELAY"

// runExecLogServer serves until stdin closes, then exits.
func runExecLogServer(path string) {
	s := execLogServer(path)
	if d, err := time.ParseDuration(os.Getenv(execStartDelayEnv)); err == nil {
		time.Sleep(d) // the cold start is the behaviour under test
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// execLogServer is the server of runExecLogServer. Its tools: work {rid,
// delay_ms} logs rid, waits delay_ms and answers rid; echo and add (for
// the reference SDK's client) log "echo"/"add".
func execLogServer(path string) *mcp.Server {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	replica := os.Getenv(execReplicaEnv)
	logID := func(id string) {
		if replica != "" {
			id += " " + replica
		}
		mu.Lock()
		defer mu.Unlock()
		// One write(2) of one line with O_APPEND: lines of several
		// processes never interleave.
		f.Write([]byte(id + "\n"))
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "execlog", Version: "1.0.0"}, nil)
	type work struct {
		RID     string `json:"rid"`
		DelayMS int    `json:"delay_ms,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "work", Description: "Log rid, wait delay_ms, answer rid."}, func(ctx context.Context, _ *mcp.CallToolRequest, in work) (*mcp.CallToolResult, map[string]string, error) {
		logID(in.RID)
		select {
		case <-time.After(time.Duration(in.DelayMS) * time.Millisecond):
		case <-ctx.Done():
		}
		return nil, map[string]string{"rid": in.RID}, nil
	})
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		logID("echo")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add"}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, map[string]float64, error) {
		logID("add")
		return nil, map[string]float64{"sum": in.A + in.B}, nil
	})
	return s
}
