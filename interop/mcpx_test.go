//lint:file-ignore SA1019 sampling and logging are deprecated (SEP-2577) but still relayed through rooms
package interop

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/bridge"
	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/roomtest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingServer is @modelcontextprotocol/server-everything, pinned in
// package.json, over stdio.
var everythingServer = []string{"node", filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}

// testRoom is a gateway on loopback and a way to mint its tokens.
type testRoom struct{ *roomtest.Gateway }

func startRoom(t *testing.T) *testRoom {
	t.Helper()
	return &testRoom{roomtest.Start(t, room.Options{HeartbeatInterval: 30 * time.Second})}
}

func (r *testRoom) clientOptions(t *testing.T, topic, id string) participant.Options {
	return participant.Options{Gateway: r.URL, Topic: topic, Token: r.Token(topic, id),
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}
}

// bridge puts server-everything into the topic as id. started receives
// each child process the bridge starts.
func (r *testRoom) bridge(t *testing.T, topic, id string, started chan<- *exec.Cmd) *bridge.Bridge {
	t.Helper()
	requireNodeModules(t)
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	var stderr lockedBuffer
	b, err := bridge.Start(ctx, bridge.Options{
		Participant: r.clientOptions(t, topic, id),
		Command: func() *exec.Cmd {
			cmd := exec.Command(everythingServer[0], everythingServer[1:]...)
			if started != nil {
				select {
				case started <- cmd:
				default:
				}
			}
			return cmd
		},
		Stderr:     &stderr,
		RestartMin: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("bridge %s: %v; stderr: %s", id, err, stderr.String())
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func connect(t *testing.T, opts participant.Options) *participant.Client {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	c, err := participant.Connect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Two bridges, each in front of a real stdio MCP server from the npm
// registry, and Go participants in one topic, calling each other's tools,
// resources and prompts, with progress, sampling and error codes carried
// end to end.
func TestMCPx_BridgesAndGoParticipants(t *testing.T) {
	r := startRoom(t)
	const topic = "room:interop"
	r.bridge(t, topic, "alpha", nil)
	r.bridge(t, topic, "beta", nil)

	// "go" is a go-sdk server (a participant others call) and a go-sdk
	// client of both bridges.
	goServer := mcp.NewServer(&mcp.Implementation{Name: "go-participant", Version: "1.0.0"}, nil)
	mcp.AddTool(goServer, &mcp.Tool{Name: "shout"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
	})
	gopts := r.clientOptions(t, topic, "go")
	gopts.Server = participant.SDKServer(goServer)
	goClient := connect(t, gopts)

	type step struct {
		progress float64
		token    any
	}
	progress := make(chan step, 16)
	updated := make(chan string, 4)
	var sampled atomic.Int32
	sdkClient := mcp.NewClient(&mcp.Implementation{Name: "go-client", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "go-test-model", Role: "assistant",
				Content: &mcp.TextContent{Text: "sampled by go for: " + req.Params.Messages[0].Content.(*mcp.TextContent).Text}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- step{req.Params.Progress, req.Params.ProgressToken}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default:
			}
		},
	})
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	alpha, err := sdkClient.Connect(ctx, goClient.PeerTransport("alpha"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alpha.Close()
	beta, err := sdkClient.Connect(ctx, goClient.PeerTransport("beta"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer beta.Close()

	t.Run("the server's own initialize result", func(t *testing.T) {
		res := alpha.InitializeResult()
		if res.ServerInfo == nil || res.ServerInfo.Name != "mcp-servers/everything" || res.ServerInfo.Version != "2.0.0" {
			t.Fatalf("serverInfo %+v: want the child's, not the bridge's", res.ServerInfo)
		}
		caps := res.Capabilities
		if caps.Resources == nil || !caps.Resources.Subscribe || caps.Prompts == nil || caps.Logging == nil || caps.Tools == nil {
			t.Fatalf("capabilities %+v", caps)
		}
		if !strings.Contains(res.Instructions, "Everything") && res.Instructions == "" {
			t.Fatalf("instructions %q", res.Instructions)
		}
	})
	t.Run("tools, with sampling routed back to the caller", func(t *testing.T) {
		tools, err := alpha.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, tool := range tools.Tools {
			names[tool.Name] = true
		}
		for _, want := range []string{"echo", "get-sum", "trigger-long-running-operation", "trigger-sampling-request"} {
			if !names[want] {
				t.Errorf("tool %s missing from %v", want, names)
			}
		}
		res, err := alpha.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi from go"}})
		if err != nil || text(t, res) != "Echo: hi from go" {
			t.Fatalf("echo: %v %v", res, err)
		}
		res, err = beta.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 40}})
		if err != nil || !strings.Contains(text(t, res), "is 42") {
			t.Fatalf("get-sum: %v %v", res, err)
		}
		res, err = alpha.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-sampling-request", Arguments: map[string]any{"prompt": "haiku"}})
		if err != nil || !strings.Contains(text(t, res), "sampled by go for") || sampled.Load() != 1 {
			t.Fatalf("sampling: %v %v (sampled %d)", res, err, sampled.Load())
		}
	})
	t.Run("progress with the caller's own token", func(t *testing.T) {
		p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}}
		p.SetProgressToken("go-token")
		res, err := beta.CallTool(ctx, p)
		if err != nil || !strings.Contains(text(t, res), "Long running operation completed") {
			t.Fatalf("long-running: %v %v", res, err)
		}
		seen := map[float64]bool{}
		for len(seen) < 3 {
			select {
			case p := <-progress:
				if p.token != "go-token" {
					t.Fatalf("progress %v came with token %v", p.progress, p.token)
				}
				seen[p.progress] = true
			case <-time.After(testwait.Timeout(5 * time.Second)):
				t.Fatalf("progress of 3 steps: only %v", seen)
			}
		}
	})
	t.Run("error codes end to end", func(t *testing.T) {
		// This SDK reports an unknown tool as a tool error, not JSON-RPC.
		res, err := alpha.CallTool(ctx, &mcp.CallToolParams{Name: "no-such-tool"})
		if err != nil || !res.IsError {
			t.Fatalf("unknown tool: %v %v, want a result with isError", res, err)
		}
		_, err = alpha.GetPrompt(ctx, &mcp.GetPromptParams{Name: "no-such-prompt"})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "no-such-prompt") {
			t.Fatalf("unknown prompt: %v, want JSON-RPC -32602 with the server's message", err)
		}
		_, err = goClient.Request(ctx, "beta", "no/such/method", nil)
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeMethodNotFound {
			t.Fatalf("unknown method: %v, want -32601", err)
		}
		_, err = alpha.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://nowhere"})
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "demo://nowhere") {
			t.Fatalf("unknown resource: %v, want the server's -32602 and message", err)
		}
	})
	t.Run("resources and subscriptions", func(t *testing.T) {
		list, err := alpha.ListResources(ctx, nil)
		if err != nil || len(list.Resources) == 0 {
			t.Fatalf("resources: %v %v", list, err)
		}
		uri := "demo://resource/static/document/features.md"
		res, err := alpha.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "#") {
			t.Fatalf("read %s: %v %v", uri, res, err)
		}
		if _, err := alpha.ListResourceTemplates(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := alpha.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		if _, err := alpha.CallTool(ctx, &mcp.CallToolParams{Name: "toggle-subscriber-updates"}); err != nil {
			t.Fatal(err)
		}
		for got := ""; got != uri; {
			select {
			case got = <-updated:
			case <-time.After(testwait.Timeout(10 * time.Second)):
				t.Fatal("no notifications/resources/updated for the subscribed resource")
			}
		}
	})
	t.Run("prompts and completion", func(t *testing.T) {
		prompts, err := beta.ListPrompts(ctx, nil)
		if err != nil || len(prompts.Prompts) < 3 {
			t.Fatalf("prompts: %v %v", prompts, err)
		}
		p, err := beta.GetPrompt(ctx, &mcp.GetPromptParams{Name: "completable-prompt", Arguments: map[string]string{"department": "Sales", "name": "Eve"}})
		if err != nil || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, "promote Eve") {
			t.Fatalf("prompt: %v %v", p, err)
		}
		c, err := beta.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
			Argument: mcp.CompleteParamsArgument{Name: "department", Value: "Sa"},
		})
		if err != nil || len(c.Completion.Values) != 1 || c.Completion.Values[0] != "Sales" {
			t.Fatalf("completion: %v %v", c, err)
		}
		if err := beta.Ping(ctx, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a bridge's peer calls a go-sdk participant", func(t *testing.T) {
		other := connect(t, r.clientOptions(t, topic, "other"))
		res, err := other.Request(ctx, "go", "tools/call", map[string]any{"name": "shout", "arguments": map[string]any{"text": "hello"}})
		if err != nil || !strings.Contains(string(res), "HELLO") {
			t.Fatalf("go's tool: %s %v", res, err)
		}
		res, err = other.Request(ctx, "alpha", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "x"}})
		if err != nil || !strings.Contains(string(res), "Echo: x") {
			t.Fatalf("alpha from other: %s %v", res, err)
		}
	})
}

// A bridge whose server dies fails the calls in flight (no hang), restarts
// it, and serves again.
func TestMCPx_BridgeRestartsItsServer(t *testing.T) {
	r := startRoom(t)
	const topic = "room:restart"
	started := make(chan *exec.Cmd, 4)
	r.bridge(t, topic, "alpha", started)
	first := <-started
	caller := connect(t, r.clientOptions(t, topic, "caller"))
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	if _, err := caller.Request(ctx, "alpha", "tools/list", nil); err != nil {
		t.Fatal(err)
	}
	// A call that reports progress every 0.2 s: its first progress proves
	// it is running in the server when the server is killed.
	running := make(chan struct{}, 1)
	relisted := make(chan struct{}, 1) // the bridge says so once a restarted server is initialized
	sdk := mcp.NewClient(&mcp.Implementation{Name: "caller"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case running <- struct{}{}:
			default:
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case relisted <- struct{}{}:
			default:
			}
		},
	})
	cs, err := sdk.Connect(ctx, caller.PeerTransport("alpha"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	failed := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 30, "steps": 150}}
		p.SetProgressToken("run")
		_, err := cs.CallTool(ctx, p)
		failed <- err
	}()
	select {
	case <-running:
	case <-time.After(testwait.Timeout(20 * time.Second)):
		t.Fatal("the long call never reported progress")
	}
	first.Process.Kill()
	select {
	case err := <-failed:
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || !strings.Contains(werr.Message, "exited") {
			t.Fatalf("call in flight: %v, want an error saying the server exited", err)
		}
	case <-time.After(testwait.Timeout(20 * time.Second)):
		t.Fatal("the call in flight hangs after the server died")
	}
	select {
	case <-started:
	case <-time.After(testwait.Timeout(20 * time.Second)):
		t.Fatal("the server was not restarted")
	}
	select {
	case <-relisted:
	case <-time.After(testwait.Timeout(20 * time.Second)):
		t.Fatal("no tools/list_changed after the restart")
	}
	res, err := caller.Request(ctx, "alpha", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "again"}})
	if err != nil || !strings.Contains(string(res), "Echo: again") {
		t.Fatalf("no service after the restart: %s %v", res, err)
	}
}
