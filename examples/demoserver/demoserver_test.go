package demoserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := demoserver.New().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestTools(t *testing.T) {
	cs := connect(t)
	ctx := context.Background()
	for _, tc := range []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"add", map[string]any{"a": 2, "b": 3.5}, `{"sum":5.5}`, false},
		{"echo", map[string]any{"text": "héllo"}, "héllo", false},
		{"word_count", map[string]any{"text": "one two\nthree\n"}, `{"characters":14,"lines":2,"words":3}`, false},
		{"time", map[string]any{"zone": "Nowhere/Atlantis"}, "unknown time zone", true},
		{"time", map[string]any{}, `"zone":"UTC"`, false},
		{"count", map[string]any{"n": 3, "delay_ms": 1}, "counted to 3", false},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError != tc.isError || !strings.Contains(text, tc.want) {
			t.Errorf("%s(%v) = %q (isError %v), want %q (isError %v)", tc.tool, tc.args, text, res.IsError, tc.want, tc.isError)
		}
	}
}

func TestCountReportsProgress(t *testing.T) {
	ctx := context.Background()
	progress := make(chan float64, 10)
	ct, st := mcp.NewInMemoryTransports()
	demoserver.New().Connect(ctx, st, nil)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params.Progress },
	}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 4, "delay_ms": 1}}
	params.SetProgressToken("c")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	for want := 1.0; want <= 4; want++ {
		if got := <-progress; got != want {
			t.Fatalf("progress %v, want %v", got, want)
		}
	}
}

func TestResourceAndPrompt(t *testing.T) {
	cs := connect(t)
	ctx := context.Background()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: demoserver.ReadmeURI})
	if err != nil || !strings.Contains(res.Contents[0].Text, "cvm demo server") {
		t.Fatalf("readme: %v %v", res, err)
	}
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "review", Arguments: map[string]string{"code": "x := 1", "language": "Go"}})
	if err != nil || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, "review Go code") {
		t.Fatalf("prompt: %v %v", p, err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "review"}); err == nil {
		t.Fatal("prompt without its required argument succeeded")
	}
}
