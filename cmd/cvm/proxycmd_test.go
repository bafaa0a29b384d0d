package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
)

// rpc writes one JSON-RPC message to a proxy's stdin.
func rpc(t *testing.T, p *proc, msg string) {
	t.Helper()
	if _, err := io.WriteString(p.Stdin, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

// answer reads the proxy's next stdout line, which must be JSON-RPC.
func answer(t *testing.T, p *proc) map[string]any {
	t.Helper()
	line := p.Line(t)
	var msg map[string]any
	if err := json.Unmarshal([]byte(line), &msg); err != nil || msg["jsonrpc"] != "2.0" {
		t.Fatalf("stdout line %q is not JSON-RPC (%v); stderr: %s", line, err, p.Stderr)
	}
	return msg
}

func TestProxyCommand_SpeaksMCPOnStdioUntilSignalOrEOF(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	for _, end := range []string{"SIGTERM", "SIGINT", "EOF"} {
		t.Run(end, func(t *testing.T) {
			c := newCLI(t)
			p := startCVM(t, c, "proxy", npub, "--relay", relayURL, "--log-level", "debug")
			rpc(t, p, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
			init := answer(t, p)
			if info := init["result"].(map[string]any)["serverInfo"].(map[string]any); info["name"] != "cvm-demo" || init["id"] != float64(1) {
				t.Fatalf("initialize answer %v", init)
			}
			rpc(t, p, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			rpc(t, p, `{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"add","arguments":{"a":40,"b":2}}}`)
			res := answer(t, p)
			if res["id"] != "two" || fmt.Sprint(res["result"].(map[string]any)["structuredContent"]) != "map[sum:42]" {
				t.Fatalf("tools/call answer %v", res)
			}
			var code int
			switch end {
			case "SIGTERM":
				code = p.Stop(t, syscall.SIGTERM)
			case "SIGINT":
				code = p.Stop(t, os.Interrupt)
			case "EOF":
				p.Stdin.Close()
				code = p.Wait(t)
			}
			if code != 0 {
				t.Fatalf("exit code %d; stderr: %s", code, p.Stderr)
			}
			// Debug logs about every message went to stderr; stdout held
			// the two answers and nothing else.
			if rest, _ := io.ReadAll(p.Stdout); len(rest) != 0 {
				t.Errorf("more on stdout: %q", rest)
			}
			if !strings.Contains(p.Stderr.String(), "tools/call") || !strings.Contains(p.Stderr.String(), "proxy stopped") {
				t.Errorf("stderr: %s", p.Stderr)
			}
			// The call is in the user's history of the server.
			pk, err := nostrx.ParsePublicKey(npub)
			if err != nil {
				t.Fatal(err)
			}
			cache, err := config.CacheDir(func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if n, ok, _ := discovery.OpenHistory(filepath.Join(cache, "history.json")).Get(pk.Key).Stats(); n != 1 || ok != 1 {
				t.Errorf("history of the server: %d calls, %d succeeded; want the one", n, ok)
			}
		})
	}
}

func TestProxyCommand_BadInput(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy"}, "proxy wants 1 argument, got none\nusage:  cvm proxy SERVER\nexample: cvm proxy npub1…"},
		{[]string{"proxy", "weather"}, `unknown server "weather"`},
		{[]string{"proxy", "npub1qqqq"}, "invalid key"},
	} {
		code, out, errOut := c.run(tc.args...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stdout %q, stderr %q", tc.args, code, out, errOut)
		}
	}
}

func TestProxyCommand_LogFile(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	c := newCLI(t)
	path := filepath.Join(t.TempDir(), "proxy.log")
	// Empty input: the host is gone at once, and the proxy ends cleanly.
	code, out, errOut := c.run("proxy", npub, "--relay", relayURL, "--log-file", path)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("code %d, stdout %q, stderr %q; want 0 and nothing on either", code, out, errOut)
	}
	logged, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(logged), "proxy ready") || !strings.Contains(string(logged), "proxy stopped") {
		t.Fatalf("log file: %q %v", logged, err)
	}
}
