package interop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// inspector runs the MCP Inspector (pinned in inspector/) in --cli mode
// against cvm market with marketArgs, for one method, and returns what it
// printed.
func inspector(t *testing.T, home string, marketArgs []string, method ...string) string {
	t.Helper()
	launcher := filepath.Join("inspector", "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(launcher); err != nil {
		t.Fatal("interop/inspector/node_modules is missing; run: make interop-deps")
	}
	args := append([]string{launcher, "--cli", build.CVM(t), "market"}, marketArgs...)
	code, out, errOut := cvmtest.Run(t, "node", cvmtest.Options{Env: cvmEnv(home)}, append(args, method...)...)
	if code != 0 {
		t.Fatalf("inspector %v: exit %d; %s%s", method, code, out, errOut)
	}
	return out
}

// The MCP Inspector's CLI lists cvm market's tools and calls them: search
// finds a provider's tool, call runs it on that server.
func TestMarket_InspectorCLIListsAndCalls(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "srv=0")
	_, npub := marketProvider(t, r.URL, sim.Wallets["srv"], "0")
	home := t.TempDir()
	market := []string{"--relay", r.URL, "--trust", npub, "--timeout", "10s"}

	var listed struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	out := inspector(t, home, market, "--method", "tools/list")
	if json.Unmarshal([]byte(out), &listed) != nil || len(listed.Tools) != 4 {
		t.Fatalf("tools/list: %s", out)
	}

	out = inspector(t, home, market, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=sum")
	if !strings.Contains(out, npub) || !strings.Contains(out, "get-sum") {
		t.Fatalf("search: %s", out)
	}
	out = inspector(t, home, market, "--method", "tools/call", "--tool-name", "call", "--tool-arg", "server="+npub, "tool=get-sum", `arguments={"a":2,"b":3}`)
	var called struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal([]byte(out), &called) != nil || called.IsError || len(called.Content) == 0 || !strings.Contains(called.Content[0].Text, "5") {
		t.Fatalf("call: %s", out)
	}
}
