package market

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"testing"

	"github.com/cvmgo/cvm/discovery"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// validToolName is what MCP takes as a tool name.
var validToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// An announcement is anyone's: whatever a server names its tools and
// whatever schema it gives them, mounting them names them validly and
// never panics (the SDK's refusals are caught and the tool left out).
func FuzzMountedTool(f *testing.F) {
	f.Add("translate", "My Server", `{"type":"object","properties":{"text":{"type":"string"}}}`)
	f.Add("../../etc", "", `{"type":"string"}`)
	f.Add("ünïcödé tool!!", "名前", `{"type":"object","x-mcp-header":{"a":1}}`)
	f.Add("", "x", `null`)
	f.Fuzz(func(t *testing.T, tool, server, schema string) {
		m := &Market{log: slog.New(slog.DiscardHandler), server: mcp.NewServer(&mcp.Implementation{Name: "fuzz"}, nil)}
		out := map[string]mounted{}
		name := toolName(server) + "__" + toolName(tool)
		p := discovery.Provider{Server: discovery.Server{Npub: "npub1fuzz", Name: server}, Tool: discovery.Tool{Name: tool, InputSchema: json.RawMessage(schema)}}
		add(out, name, p.Tool, tool, CallInput{Server: "npub1fuzz", Tool: tool}, []discovery.Provider{p})
		for n, mt := range out {
			if !validToolName.MatchString(n) {
				t.Fatalf("mounted name %q", n)
			}
			m.addMounted(mt)
		}
	})
}
