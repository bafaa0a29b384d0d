package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cvm market --http serves the market over streamable HTTP: a host finds
// the demo server's add by its common schema through search, and a call
// by schema with no trusted provider is refused with what to do; --mount
// makes the server's tools the market's own.
func TestMarketCLI_ServesStreamableHTTP(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	gw := startCVM(t, c, "gateway", "--relay", r.URL, "--announce", "--common-tool", "add", "--category", "math", "--", demoServer(t))
	var gwReady gatewayReady
	gw.ReadyLine(t, &gwReady)
	gw.Stderr.Await(t, 20*time.Second, `msg=announced`)

	m := startCVM(t, c, "market", "--http", "127.0.0.1:0", "--relay", r.URL, "--timeout", "5s", "--mount", gwReady.Npub)
	var ready struct {
		Ready bool   `json:"ready"`
		URL   string `json:"url"`
	}
	m.ReadyLine(t, &ready)
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ready.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// --mount: the gateway's tools are the market's own, namespaced.
	mountedAdd := "cvm-demo-server-" + gwReady.Npub[5:11] + "__add"
	testwait.Eventually(t, 20*time.Second, "the mounted add to be listed", func() bool {
		for tool, err := range cs.Tools(ctx, nil) {
			if err == nil && tool.Name == mountedAdd {
				return true
			}
		}
		return false
	})

	found, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": "add", "category": "math"}})
	var offers struct {
		Offers []struct{ Server, Tool, Schema string } `json:"offers"`
	}
	if err != nil || found.IsError || json.Unmarshal(mustJSON(t, found.StructuredContent), &offers) != nil || len(offers.Offers) != 1 ||
		offers.Offers[0].Server != gwReady.Npub || offers.Offers[0].Tool != "add" || offers.Offers[0].Schema == "" {
		t.Fatalf("search: %+v, %v", found, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call", Arguments: map[string]any{"schema": offers.Offers[0].Schema, "tool": "add", "arguments": map[string]any{"a": 1, "b": 2}}})
	if err != nil || !res.IsError || !strings.Contains(contentText(res.Content), "none of them trusted") {
		t.Fatalf("untrusted call: %+v, %v; want a tool error", res, err)
	}
	cs.Close()
	if code := m.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("market exit %d after SIGTERM; stderr: %s", code, m.Stderr)
	}
}
