// Package demoserver is the MCP server that `cvm demo` puts on Nostr: an
// ordinary go-sdk server with a few tools, a resource and a prompt, and
// nothing ContextVM-specific in it. That is the point of the gateway: any MCP
// server, unchanged, becomes reachable by public key.
//
// Run it on stdio with `go run ./examples/demoserver/cmd`, or behind a
// gateway with `cvm gateway -- go run ./examples/demoserver/cmd`.
package demoserver

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the server's name in its initialize result.
const Name = "cvm-demo"

// ReadmeURI is the URI of the server's one resource.
const ReadmeURI = "demo://readme"

// New returns the demo server. Each call returns an independent server.
func New() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "cvm demo server", Version: "1.0.0"}, &mcp.ServerOptions{
		Instructions: "A small demo server: arithmetic, text statistics, the time anywhere, and a counter that reports progress.",
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."}, add)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Return the text unchanged."}, echo)
	mcp.AddTool(s, &mcp.Tool{Name: "word_count", Description: "Count the words, lines and characters of a text."}, wordCount)
	mcp.AddTool(s, &mcp.Tool{Name: "time", Description: "The current time in an IANA time zone (default UTC)."}, now)
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Count from 1 to n, reporting progress at each step."}, count)
	mcp.AddTool(s, &mcp.Tool{Name: "caller", Description: "Who is calling: the public key a ContextVM gateway passes in _meta.clientPubkey (cvm gateway --inject-client-pubkey), or \"unknown\"."}, caller)
	s.AddResource(&mcp.Resource{
		URI:         ReadmeURI,
		Name:        "readme",
		Title:       "About this server",
		Description: "What this server is and how it reached you.",
		MIMEType:    "text/markdown",
	}, readme)
	s.AddPrompt(&mcp.Prompt{
		Name:        "review",
		Description: "Ask for a careful review of a piece of code.",
		Arguments: []*mcp.PromptArgument{
			{Name: "code", Description: "The code to review.", Required: true},
			{Name: "language", Description: "Its programming language."},
		},
	}, review)
	return s
}

type addIn struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type sum struct {
	Sum float64 `json:"sum"`
}

func add(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, sum, error) {
	return nil, sum{in.A + in.B}, nil
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text"`
}

func echo(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
}

// caller answers with _meta.clientPubkey (CEP-16): the gateway passes the
// caller's key there, since a stdio server sees no transport to ask.
func caller(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	who := "unknown"
	if pk, ok := req.Params.GetMeta()["clientPubkey"].(string); ok {
		who = pk
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
}

type stats struct {
	Words      int `json:"words"`
	Lines      int `json:"lines"`
	Characters int `json:"characters"`
}

func wordCount(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, stats, error) {
	st := stats{Words: len(strings.FieldsFunc(in.Text, unicode.IsSpace)), Characters: len([]rune(in.Text))}
	if in.Text != "" {
		st.Lines = strings.Count(in.Text, "\n") + 1
		if strings.HasSuffix(in.Text, "\n") {
			st.Lines--
		}
	}
	return nil, st, nil
}

type timeIn struct {
	Zone string `json:"zone,omitempty" jsonschema:"an IANA time zone such as Europe/Paris; default UTC"`
}

type timeOut struct {
	Time string `json:"time"`
	Zone string `json:"zone"`
}

func now(_ context.Context, _ *mcp.CallToolRequest, in timeIn) (*mcp.CallToolResult, timeOut, error) {
	zone := in.Zone
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		// A tool error (isError), not a protocol error: the model can retry.
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("unknown time zone %q: use an IANA name such as Europe/Paris", zone),
		}}}, timeOut{}, nil
	}
	return nil, timeOut{Time: time.Now().In(loc).Format(time.RFC3339), Zone: zone}, nil
}

type countIn struct {
	N       int `json:"n" jsonschema:"how far to count (1 to 100)"`
	DelayMs int `json:"delay_ms,omitempty" jsonschema:"pause between steps in milliseconds (default 100, at most 1000)"`
}

func count(ctx context.Context, req *mcp.CallToolRequest, in countIn) (*mcp.CallToolResult, any, error) {
	if in.N < 1 || in.N > 100 {
		return nil, nil, fmt.Errorf("n must be between 1 and 100, not %d", in.N)
	}
	delay := 100 * time.Millisecond
	if in.DelayMs > 0 {
		delay = time.Duration(min(in.DelayMs, 1000)) * time.Millisecond
	}
	token := req.Params.GetProgressToken()
	for i := 1; i <= in.N; i++ {
		if token != nil {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf("counted %d", i),
			})
			if err != nil {
				return nil, nil, err
			}
		}
		if i < in.N {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("counted to %d", in.N)}}}, nil, nil
}

const readmeText = `# cvm demo server

An ordinary MCP server (the official Go SDK, nothing else). A cvm gateway
carries its messages as Nostr events through relays, gift-wrapped with NIP-44
when encryption is on, so any MCP client can reach it by public key.
`

func readme(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
		{URI: req.Params.URI, MIMEType: "text/markdown", Text: readmeText},
	}}, nil
}

func review(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	code := req.Params.Arguments["code"]
	if code == "" {
		return nil, fmt.Errorf("argument code is required")
	}
	lang := req.Params.Arguments["language"]
	if lang == "" {
		lang = "this"
	}
	return &mcp.GetPromptResult{
		Description: "A code review request",
		Messages: []*mcp.PromptMessage{{
			Role: "user",
			Content: &mcp.TextContent{Text: fmt.Sprintf(
				"Please review %s code. Point out bugs first, then anything unclear, then style.\n\n%s", lang, code)},
		}},
	}, nil
}
