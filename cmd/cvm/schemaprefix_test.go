package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// twoToolsAlike returns the names of two tools, with the input schema
// {"type":"object"}, whose common schema hashes start with the same hex
// digit, and their hashes.
func twoToolsAlike(t *testing.T) (names, hashes [2]string) {
	t.Helper()
	byDigit := map[byte]string{}
	for i := 0; ; i++ {
		name := fmt.Sprintf("tool%d", i)
		hash, err := commonschema.Hash(commonschema.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if first, ok := byDigit[hash[0]]; ok {
			h0, _ := commonschema.Hash(commonschema.Tool{Name: first, InputSchema: json.RawMessage(`{"type":"object"}`)})
			return [2]string{first, name}, [2]string{h0, hash}
		}
		byDigit[hash[0]] = name
	}
}

// TestSchemaHash_PrefixesWhereAHashIsTaken: the 12 characters cvm shows of
// a schema hash (with or without their "…") select it in cvm discover
// --schema and cvm call --schema, as the whole hash does; a prefix that
// several hashes share is refused listing them, one that none has says so,
// and the advice of an error is a command that works.
func TestSchemaHash_PrefixesWhereAHashIsTaken(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	names, hashes := twoToolsAlike(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "prefixes", Version: "1"}, nil)
	for _, name := range names {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil
		})
	}
	srv := serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}, Announce: true, CommonTools: names[:]}, s)
	waitForEvent(t, r.URL, nostr.Filter{Authors: []nostr.PubKey{srv.PublicKey()}, Kinds: []nostr.Kind{contextvm.KindToolsList}})
	c := newCLI(t)

	// The hashes announced are those computed here.
	code, out, errOut := c.run("discover", "--schemas", "--json", "--relay", r.URL)
	var schemas []discovery.Schema
	if code != 0 || json.Unmarshal([]byte(out), &schemas) != nil || len(schemas) != 2 {
		t.Fatalf("discover --schemas: code %d, %s %s", code, out, errOut)
	}
	for _, sc := range schemas {
		if sc.Hash != hashes[0] && sc.Hash != hashes[1] {
			t.Fatalf("announced %s, computed %v", sc.Hash, hashes)
		}
	}

	// What cvm discover shows of the first hash...
	code, out, _ = c.run("discover", "--relay", r.URL)
	shown := regexp.MustCompile(`schema ([0-9a-f]{12}) verified`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(shown) != 2 {
		t.Fatalf("discover shows %q", out)
	}
	short := hashes[0][:12]
	// ...selects it, alone, with or without the ellipsis, and in capitals.
	for _, arg := range []string{short, short + "…", strings.ToUpper(short), hashes[0]} {
		servers := discoverJSON(t, c, func([]discovery.Server) bool { return true }, "--relay", r.URL, "--schema", arg)
		if len(servers) != 1 {
			t.Fatalf("--schema %s: %d servers", arg, len(servers))
		}
		if code, out, errOut := c.run("discover", "--relay", r.URL, "--schema", arg); code != 0 || !strings.Contains(out, "* "+names[0]) || strings.Contains(out, "* "+names[1]) {
			t.Errorf("discover --schema %s marks:\n%s%s", arg, out, errOut)
		}
	}

	// cvm call --schema takes it too: untrusted, the call is refused, and
	// its advice finds the server.
	code, _, errOut = c.run("call", "--schema", short, names[0], "--relay", r.URL, "--timeout", "5s")
	advice := regexp.MustCompile(`see: (cvm discover --schema [0-9a-f]+)`).FindStringSubmatch(errOut)
	if code != exitProtocol || !strings.Contains(errOut, "none of them trusted") || advice == nil {
		t.Fatalf("call --schema %s, untrusted: code %d, %s", short, code, errOut)
	}
	servers := discoverJSON(t, c, func([]discovery.Server) bool { return true }, append(strings.Fields(advice[1])[2:], "--relay", r.URL)...)
	if len(servers) != 1 {
		t.Fatalf("the advice %q finds %d servers", advice[1], len(servers))
	}
	code, out, errOut = c.run("call", "--schema", short, names[0], "--relay", r.URL, "--timeout", "5s", "--trust-policy", "any")
	if code != 0 || out != "ran "+names[0]+"\n" {
		t.Fatalf("call --schema %s: code %d, %q, %s", short, code, out, errOut)
	}

	// A prefix both hashes share is refused, naming both.
	for _, args := range [][]string{
		{"discover", "--schema", hashes[0][:1]},
		{"call", "--schema", hashes[0][:1], names[0], "--trust-policy", "any"},
	} {
		code, out, errOut := c.run(append(args, "--relay", r.URL)...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, "--schema "+hashes[0][:1]+" is ambiguous: 2 common schema hashes start with it") ||
			!strings.Contains(errOut, hashes[0]) || !strings.Contains(errOut, hashes[1]) || !strings.Contains(errOut, names[1]) {
			t.Errorf("%q: code %d, stdout %q, stderr %s", args, code, out, errOut)
		}
	}

	// A prefix no hash has says so.
	none := "f"
	if hashes[0][0] == 'f' {
		none = "0"
	}
	none += strings.Repeat("0", 11)
	if code, out, errOut := c.run("discover", "--schema", none, "--relay", r.URL); code != 0 || out != "" || !strings.Contains(errOut, "no server on 1 relay(s) claims a common schema whose hash starts with "+none) {
		t.Errorf("discover --schema %s: code %d, %q, %s", none, code, out, errOut)
	}
	if code, _, errOut := c.run("call", "--schema", none, names[0], "--relay", r.URL); code != exitProtocol || !strings.Contains(errOut, "whose hash starts with "+none) {
		t.Errorf("call --schema %s: code %d, %s", none, code, errOut)
	}

	// What is no hash at all is refused before asking anyone.
	for _, args := range [][]string{{"discover", "--schema", "xyz"}, {"call", "--schema", "xyz", "t"}, {"call", "--schema", strings.Repeat("a", 65), "t"}} {
		if code, _, errOut := c.run(append(args, "--relay", "ws://127.0.0.1:1")...); code != exitLocal || !strings.Contains(errOut, "want a common schema hash (64 hex characters) or the start of one") {
			t.Errorf("%q: code %d, %s", args, code, errOut)
		}
	}
}
