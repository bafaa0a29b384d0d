package interop

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

type toolCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	Progress  bool           `json:"progress,omitempty"`
}

type stdioHostResult struct {
	OK         bool           `json:"ok"`
	Error      string         `json:"error"`
	ServerInfo map[string]any `json:"serverInfo"`
	Tools      []string       `json:"tools"`
	Results    []struct {
		Text       string         `json:"text"`
		Structured map[string]any `json:"structured"`
		IsError    bool           `json:"isError"`
		Progress   []float64      `json:"progress"`
		Probe      progressProbe  `json:"progressProbe"`
	} `json:"results"`
	ProxyLoggedToStderr bool `json:"proxyLoggedToStderr"`
}

// runStdioHost has the official TypeScript MCP client start `cvm proxy
// SERVER` over stdio, as Claude Desktop would, and make calls through it.
func runStdioHost(t *testing.T, relayURL, server, caps string, calls []toolCall) stdioHostResult {
	t.Helper()
	callsJSON, _ := json.Marshal(calls)
	var res stdioHostResult
	runScript(t, "stdio-host.mjs", map[string]string{
		"CVM_BIN": build.CVM(t), "SERVER": server, "RELAY_URL": relayURL, "CVM_HOME": t.TempDir(),
		"CALLS": string(callsJSON), "CAPS": caps,
	}, &res)
	if !res.OK {
		t.Fatalf("stdio host through cvm proxy: %s", res.Error)
	}
	if len(res.Results) != len(calls) {
		t.Fatalf("%d results for %d calls", len(res.Results), len(calls))
	}
	if !res.ProxyLoggedToStderr {
		t.Error("the proxy's logs did not reach stderr")
	}
	return res
}

// TestProxy_TSHostToTSServer: an MCP host on the official TypeScript SDK
// uses a server built on the reference ContextVM SDK through cvm proxy.
func TestProxy_TSHostToTSServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	server := startTSServer(t, r.URL, "optional", "optional", nil)
	res := runStdioHost(t, r.URL, server, "", []toolCall{
		{Name: "echo", Arguments: map[string]any{"text": "héllo 🌍"}},
		{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}},
		{Name: "slow", Arguments: map[string]any{"steps": 3, "delayMs": 20}, Progress: true},
	})
	if res.ServerInfo["name"] != "ts-reference-server" || !slices.Contains(res.Tools, "slow") {
		t.Errorf("server %v tools %v", res.ServerInfo, res.Tools)
	}
	if res.Results[0].Text != "héllo 🌍" || res.Results[1].Structured["sum"] != float64(5) {
		t.Errorf("echo %q, add %v", res.Results[0].Text, res.Results[1].Structured)
	}
	if res.Results[2].Text != "done" {
		t.Errorf("slow %q", res.Results[2].Text)
	}
	// The reference server waits delayMs after its last progress.
	checkPeerProgress(t, "slow", res.Results[2].Progress, []float64{1, 2, 3}, res.Results[2].Probe, 20*time.Millisecond)
}

// TestProxy_TSHostToGateway: the same host through cvm proxy and cvm
// gateway to server-everything; the gateway test adds the server-to-client
// requests.
func TestProxy_TSHostToGateway(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	gw := startGateway(t, "--relay", r.URL, "--", "node", everything(t))
	res := runStdioHost(t, r.URL, gw.Npub, "", []toolCall{
		{Name: "echo", Arguments: map[string]any{"message": "through two cvm processes"}},
		{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.2, "steps": 2}, Progress: true},
	})
	if res.ServerInfo["name"] != "mcp-servers/everything" {
		t.Errorf("server %v", res.ServerInfo)
	}
	if !strings.Contains(res.Results[0].Text, "through two cvm processes") {
		t.Errorf("results %+v", res.Results)
	}
	checkPeerProgress(t, "trigger-long-running-operation", res.Results[1].Progress, []float64{1, 2}, res.Results[1].Probe, cvmProgressSettle)
}
