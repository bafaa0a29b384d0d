package interop

import (
	"strings"
	"testing"
)

type httpClientResult struct {
	OK           bool           `json:"ok"`
	Error        string         `json:"error"`
	Step         string         `json:"step"`
	Capabilities map[string]any `json:"capabilities"`
	Tools        []string       `json:"tools"`
	Result       []struct {
		Type, Text string
	} `json:"result"`
	IsError      bool   `json:"isError"`
	ConnectError string `json:"connectError"`
	Status       int    `json:"status"`
	Body         struct {
		Code, Message string
	} `json:"body"`
}

// TestGatewayHTTP_OfficialTSClient: the official TypeScript MCP client
// (@modelcontextprotocol/sdk, streamable HTTP), which knows nothing of
// NIP-10, calls a free tool of server-everything behind `cvm gateway
// --http` (the seed's test case 5, plain client against an extended
// server), and is refused with 401 and a JSON {code, message} by a gateway
// started with --require-auth.
func TestGatewayHTTP_OfficialTSClient(t *testing.T) {
	server := everything(t)
	t.Run("free call", func(t *testing.T) {
		gw := startGateway(t, "--http", "127.0.0.1:0", "--no-nostr", "--", "node", server)
		if !strings.HasPrefix(gw.HTTP, "http://127.0.0.1:") || gw.DID != "did:nostr:"+gw.Pubkey {
			t.Fatalf("ready line: http %q did %q", gw.HTTP, gw.DID)
		}
		var res httpClientResult
		runScript(t, "http-client.mjs", map[string]string{"MCP_URL": gw.HTTP, "TOOL": "echo", "ARGS": `{"message":"over http"}`}, &res)
		if !res.OK {
			t.Fatalf("TS client failed in step %s: %s %s", res.Step, res.Error, res.ConnectError)
		}
		if len(res.Result) != 1 || !strings.Contains(res.Result[0].Text, "over http") || res.IsError {
			t.Fatalf("echo result %+v", res.Result)
		}
		if len(res.Tools) < 5 {
			t.Fatalf("tools %v", res.Tools)
		}
	})
	t.Run("require-auth", func(t *testing.T) {
		gw := startGateway(t, "--http", "127.0.0.1:0", "--no-nostr", "--require-auth", "--", "node", server)
		var res httpClientResult
		runScript(t, "http-client.mjs", map[string]string{"MCP_URL": gw.HTTP, "TOOL": "echo", "EXPECT_REFUSAL": "1"}, &res)
		if !res.OK || res.ConnectError == "" {
			t.Fatalf("an unsigned TS client was not refused: %+v", res)
		}
		if res.Status != 401 || res.Body.Code != "auth_missing" || res.Body.Message == "" {
			t.Fatalf("refusal: %d %+v, want 401 with {code, message}", res.Status, res.Body)
		}
		// The TS client surfaces the body, so the host sees what to do.
		if !strings.Contains(res.ConnectError, "DIDAuthV1") {
			t.Errorf("the TS client's error does not carry the refusal's message: %s", res.ConnectError)
		}
	})
}
