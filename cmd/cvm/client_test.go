package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip19"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoOnNostr serves the demo server (plus a tool that answers with a
// JSON-RPC error) over ContextVM on an in-memory relay, and returns the
// relay URL and the server's npub.
func demoOnNostr(t *testing.T) (relayURL, npub string) {
	t.Helper()
	r := relaytest.Start(t, relay.Options{})
	s := demoserver.New()
	mcp.AddTool(s, &mcp.Tool{Name: "refuse"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused on principle"}
	})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), s)
	t.Cleanup(func() { srv.Close() })
	return r.URL, nostrx.EncodeNpub(srv.PublicKey())
}

func TestCall(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	c := newCLI(t)
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   string // substring; "" means empty
		stderr   string // substring
		noStdout bool
	}{
		{"key=value typed by the schema", []string{"add", "a=2", "b=3.5"}, 0, `{"sum":5.5}`, "", false},
		{"a string stays a string", []string{"echo", "text=42"}, 0, "42\n", "", false},
		{"JSON object", []string{"add", `{"a":1,"b":2}`}, 0, `{"sum":3}`, "", false},
		{"progress on stderr", []string{"count", "n=3", "delay_ms=1"}, 0, "counted to 3", "progress 3/3: counted 3", false},
		{"tool reports an error", []string{"time", "zone=Nowhere/Atlantis"}, exitRemote, "", "tool time reported an error: unknown time zone", true},
		{"JSON-RPC error", []string{"refuse"}, exitProtocol, "", "tools/call refuse: refused on principle (code -32602)", true},
		{"no such tool", []string{"nosuch"}, exitProtocol, "", `the server has no tool "nosuch"; it has: add, caller, count, echo, refuse, time, word_count`, true},
		{"value of the wrong type", []string{"add", "a=two", "b=1"}, exitLocal, "", `argument a: "two" is not a number`, true},
		{"arguments that fail the schema", []string{"add", "a=1"}, exitLocal, "", `arguments for add do not fit its input schema`, true},
		{"not key=value", []string{"add", "a"}, exitLocal, "", `want key=value`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := c.run(append([]string{"call", npub}, append(tc.args, "--relay", relayURL)...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) || (tc.noStdout && out != "") {
				t.Fatalf("code %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tc.code, tc.stdout, tc.stderr)
			}
			if code != 0 && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("a failure should explain itself in one line, got:\n%s", errOut)
			}
		})
	}
}

func TestCall_JSONOutput(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	c := newCLI(t)
	code, out, errOut := c.run("call", npub, "add", "a=2", "b=3", "--json", "--relay", relayURL)
	var res mcp.CallToolResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.StructuredContent.(map[string]any)["sum"] != float64(5) {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// isError still exits 1, with the result on stdout.
	code, out, _ = c.run("call", npub, "time", "zone=Nowhere/Atlantis", "--json", "--relay", relayURL)
	if code != exitRemote || json.Unmarshal([]byte(out), &res) != nil || !res.IsError {
		t.Fatalf("isError with --json: code %d, stdout %q", code, out)
	}
}

func TestClientCommands_ServerArgument(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	c := newCLI(t)
	c.writeConfig("[servers]\ndemo = " + quote(npub) + "\nbroken = \"npub1nope\"\n")
	if code, out, errOut := c.run("call", "demo", "echo", "text=hi", "--relay", relayURL); code != 0 || out != "hi\n" {
		t.Fatalf("alias: code %d, %q, %q", code, out, errOut)
	}
	pk, _ := nostrx.ParsePublicKey(npub)
	if code, out, errOut := c.run("call", pk.Key.Hex(), "echo", "text=hex", "--relay", relayURL); code != 0 || out != "hex\n" {
		t.Fatalf("hex key: code %d, %q, %q", code, out, errOut)
	}
	// An nprofile brings its relays: no --relay needed.
	nprofile := nprofileOf(t, pk.Key, relayURL)
	if code, out, errOut := c.run("call", nprofile, "echo", "text=nprofile"); code != 0 || out != "nprofile\n" {
		t.Fatalf("nprofile: code %d, %q, %q", code, out, errOut)
	}
	for _, tc := range []struct{ server, want string }{
		{"weather", `unknown server "weather": not a public key (hex, npub or nprofile), a NIP-05 name@domain, or an alias in [servers]`},
		{"broken", `server alias "broken"`},
		{"npub1qqqq", "invalid key"},
		{nostrx.EncodeNsec(nostr.Generate()), "secret key"},
	} {
		code, out, errOut := c.run("call", tc.server, "echo", "--relay", relayURL)
		if code != exitLocal || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("server %q: code %d, stderr %q; want 2 and %q", tc.server, code, errOut, tc.want)
		}
	}
}

func TestClientCommands_Unreachable(t *testing.T) {
	relayURL, _ := demoOnNostr(t)
	c := newCLI(t)
	nobody := nostrx.EncodeNpub(nostr.Generate().Public())
	start := time.Now()
	code, _, errOut := c.run("tools", nobody, "--relay", "ws://127.0.0.1:1", "--timeout", "1s")
	if code != exitLocal || !strings.Contains(errOut, "no relay answered within 1s (ws://127.0.0.1:1): is the relay running?") {
		t.Errorf("unreachable relay: code %d, stderr %q", code, errOut)
	}
	code, _, errOut = c.run("tools", nobody, "--relay", relayURL, "--timeout", "1s")
	if code != exitRemote || !strings.Contains(errOut, "is "+nobody+" running and on "+relayURL) {
		t.Errorf("server that never answers: code %d, stderr %q", code, errOut)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v: the timeouts were not honoured", time.Since(start))
	}
}

func TestToolsResourcesPrompts(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	c := newCLI(t)
	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := c.run(append(args, "--relay", relayURL)...)
		if code != wantCode {
			t.Fatalf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		return out, errOut
	}
	out, _ := run(0, "tools", npub)
	if !strings.Contains(out, "add ") || !strings.Contains(out, "Add two numbers.") || !strings.Contains(out, "word_count") {
		t.Errorf("tools: %q", out)
	}
	out, _ = run(0, "tools", npub, "--json")
	var list mcp.ListToolsResult
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Tools) != 7 || list.Tools[0].InputSchema == nil {
		t.Errorf("tools --json: %v %q", err, out)
	}
	out, _ = run(0, "resources", npub)
	if !strings.Contains(out, demoserver.ReadmeURI) || !strings.Contains(out, "text/markdown") {
		t.Errorf("resources: %q", out)
	}
	out, _ = run(0, "resources", npub, "--read", demoserver.ReadmeURI)
	if !strings.HasPrefix(out, "# cvm demo server\n") {
		t.Errorf("resources --read: %q", out)
	}
	_, errOut := run(exitRemote, "resources", npub, "--read", "demo://nothing")
	if !strings.Contains(errOut, "resources/read demo://nothing") {
		t.Errorf("missing resource: %q", errOut)
	}
	out, _ = run(0, "prompts", npub)
	if !strings.Contains(out, "review") || !strings.Contains(out, "code* language") {
		t.Errorf("prompts: %q", out)
	}
	out, _ = run(0, "prompts", npub, "--get", "review", "code=x := 1", "language=Go")
	if !strings.HasPrefix(out, "user: Please review Go code.") || !strings.Contains(out, "x := 1") {
		t.Errorf("prompts --get: %q", out)
	}
	out, _ = run(0, "prompts", npub, "--get", "review", "code=y", "--json")
	var got mcp.GetPromptResult
	if json.Unmarshal([]byte(out), &got) != nil || len(got.Messages) != 1 {
		t.Errorf("prompts --get --json: %q", out)
	}
	_, errOut = run(exitRemote, "prompts", npub, "--get", "nosuch")
	if !strings.Contains(errOut, `prompts/get nosuch: unknown prompt "nosuch"`) {
		t.Errorf("unknown prompt: %q", errOut)
	}
	_, errOut = run(exitLocal, "prompts", npub, "code=x")
	if !strings.Contains(errOut, "need --get NAME") {
		t.Errorf("prompt arguments without --get: %q", errOut)
	}
}

func nprofileOf(t *testing.T, pk nostr.PubKey, relayURL string) string {
	t.Helper()
	return nip19.EncodeNprofile(pk, []string{relayURL})
}

// TestCall_ArgumentFormCheckedBeforeSending: arguments whose form is wrong
// (JSON that does not parse, a word that is no key=value, a key twice) are
// refused before any relay is dialed: the relay here is not even there,
// and the answer is about the arguments, not the relay.
func TestCall_ArgumentFormCheckedBeforeSending(t *testing.T) {
	c := newCLI(t)
	nobody := nostrx.EncodeNpub(nostr.Generate().Public())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{nobody, "add", "{bad"}, "arguments are not a JSON object"},
		{[]string{nobody, "add", `{"a":1}`, "b=2"}, `argument "{\"a\":1}": want key=value, or a single JSON object`},
		{[]string{nobody, "add", "a"}, `argument "a": want key=value`},
		{[]string{nobody, "add", "=1"}, `argument "=1": want key=value`},
		{[]string{nobody, "add", "a=1", "a=2"}, `argument "a" given twice`},
		{[]string{"--schema", strings.Repeat("ab", 32), "add", "{bad"}, "arguments are not a JSON object"},
	} {
		code, out, errOut := c.run(append(append([]string{"call"}, tc.args...), "--relay", "ws://127.0.0.1:1", "--timeout", "30s")...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "relay") {
			t.Errorf("%q: code %d, stderr %q; want 2 and %q, before any relay", tc.args, code, errOut, tc.want)
		}
	}
}
