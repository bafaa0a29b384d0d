package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// discoverJSON runs cvm discover --json with args and checks that ok
// accepts the servers it lists.
func discoverJSON(t *testing.T, c *cli, ok func([]discovery.Server) bool, args ...string) []discovery.Server {
	t.Helper()
	code, out, errOut := c.run(append([]string{"discover", "--json"}, args...)...)
	var servers []discovery.Server
	if code != 0 || json.Unmarshal([]byte(out), &servers) != nil {
		t.Fatalf("discover: code %d, %q, %q", code, out, errOut)
	}
	if !ok(servers) {
		t.Fatalf("discover did not list what was expected: %s", out)
	}
	return servers
}

// Two gateways announce the demo server's add as a common tool at different
// prices; discover finds them, call --schema picks the cheaper and fails
// over when it stops; unannounce withdraws one.
func TestAnnounceDiscoverAndCallBySchema(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	gateway := func(price string) (*proc, gatewayReady, string) {
		key := filepath.Join(t.TempDir(), "key")
		if code, _, errOut := c.run("keygen", "--out", key); code != 0 {
			t.Fatal(errOut)
		}
		p := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--announce", "--price", "tool:add="+price,
			"--common-tool", "add", "--category", "math", "--", demoServer(t))
		var ready gatewayReady
		p.ReadyLine(t, &ready)
		p.Stderr.Await(t, 20*time.Second, `msg=announced`) // the first announcements are on the relay
		return p, ready, key
	}
	cheap, cheapReady, _ := gateway("2")
	_, dearReady, dearKey := gateway("5-8")

	servers := discoverJSON(t, c, func(s []discovery.Server) bool { return len(s) == 2 && len(s[0].Tools) > 0 && len(s[1].Tools) > 0 }, "--relay", r.URL)
	var hash string
	for _, s := range servers {
		if len(s.Relays) != 1 || s.Relays[0] != r.URL || s.Name != "cvm demo server" || len(s.Categories) != 1 {
			t.Errorf("server %+v", s)
		}
		for _, tool := range s.Tools {
			if tool.Name == "add" {
				if !tool.Verified || tool.Price == nil {
					t.Fatalf("add of %s: %+v", s.Npub, tool)
				}
				hash = tool.SchemaHash
			} else if tool.SchemaHash != "" {
				t.Errorf("%s claims a schema", tool.Name)
			}
		}
	}
	cheapOnly := discoverJSON(t, c, func(s []discovery.Server) bool { return true }, "--relay", r.URL, "--schema", hash, "--max-price", "4")
	if len(cheapOnly) != 1 || cheapOnly[0].Pubkey.Hex() != cheapReady.Pubkey {
		t.Fatalf("--max-price 4 listed %d servers", len(cheapOnly))
	}
	if code, out, _ := c.run("discover", "--relay", r.URL, "--tool", "add"); code != 0 || !strings.Contains(out, "verified") || !strings.Contains(out, "5-8 sats") {
		t.Errorf("human output:\n%s", out)
	}

	// cvm tools shows the price from the cap tags on the tools/list answer,
	// and the claim's status.
	if code, out, errOut := c.run("tools", cheapReady.Pubkey, "--relay", r.URL); code != 0 || !regexp.MustCompile(`(?m)^add +2 sats +schema [0-9a-f]{12}… verified`).MatchString(out) {
		t.Errorf("tools: code %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := c.run("tools", cheapReady.Pubkey, "--relay", r.URL, "--json")
	var listed struct {
		Prices map[string]discovery.Price `json:"prices"`
		Claims map[string]struct {
			SchemaHash string `json:"schemaHash"`
			Verified   bool   `json:"verified"`
		} `json:"claims"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || listed.Prices["add"].Amount != "2" || !listed.Claims["add"].Verified || listed.Claims["add"].SchemaHash != hash {
		t.Errorf("tools --json: code %d, %s, %s", code, out, errOut)
	}

	// cvm discover --schemas: one schema, claimed and verified by both.
	code, out, errOut = c.run("discover", "--schemas", "--relay", r.URL, "--json")
	var schemas []discovery.Schema
	if code != 0 || json.Unmarshal([]byte(out), &schemas) != nil || len(schemas) != 1 || schemas[0].Hash != hash || schemas[0].Tool != "add" || schemas[0].Claimed != 2 || schemas[0].Verified != 2 {
		t.Errorf("discover --schemas: code %d, %s, %s", code, out, errOut)
	}

	// By default only trusted servers get the arguments.
	code, _, errOut = c.run("call", "--schema", hash, "add", "a=1", "b=2", "--relay", r.URL, "--timeout", "3s")
	if code != exitProtocol || !strings.Contains(errOut, "2 server(s) announce schema") || !strings.Contains(errOut, "--trust NPUB") {
		t.Errorf("untrusted: code %d, %s", code, errOut)
	}
	if code, _, errOut := c.run("call", "--schema", hash, "add", "--trust", "npub1nope", "--relay", r.URL); code != exitLocal || !strings.Contains(errOut, "--trust") {
		t.Errorf("a malformed --trust: code %d, %s", code, errOut)
	}
	if code, _, errOut := c.run("call", "--schema", hash, "add", "--trust-policy", "some", "--relay", r.URL); code != exitLocal || !strings.Contains(errOut, "trusted-only, trusted-first, any") {
		t.Errorf("a malformed --trust-policy: code %d, %s", code, errOut)
	}

	call := func() (int, string, string) {
		return c.run("call", "--schema", hash, "add", "a=1", "b=2", "--relay", r.URL, "--timeout", "3s", "--json",
			"--trust", cheapReady.Pubkey, "--trust", dearReady.Pubkey)
	}
	code, out, errOut = call()
	var res struct {
		Result struct {
			StructuredContent map[string]float64 `json:"structuredContent"`
		} `json:"result"`
		Provider struct{ Pubkey string }  `json:"provider"`
		Attempts []struct{ Error string } `json:"attempts"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Result.StructuredContent["sum"] != 3 || res.Provider.Pubkey != cheapReady.Pubkey {
		t.Fatalf("call --schema: code %d, %s, %s", code, out, errOut)
	}

	cheap.Stop(t, syscall.SIGKILL) // announced, no longer answering
	code, out, errOut = call()
	res.Attempts = nil
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Provider.Pubkey != dearReady.Pubkey || len(res.Attempts) != 2 || res.Attempts[0].Error == "" {
		t.Fatalf("failover: code %d, %s, %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "failed after") {
		t.Errorf("the failed provider is not reported: %s", errOut)
	}
	// Trusting only the dear one sends the call there first.
	code, out, errOut = c.run("call", "--schema", hash, "add", "a=1", "b=2", "--relay", r.URL, "--timeout", "3s", "--json", "--trust", dearReady.Pubkey)
	res.Attempts = nil
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Attempts) != 1 || res.Provider.Pubkey != dearReady.Pubkey {
		t.Fatalf("trusting the dear one: code %d, %s, %s", code, out, errOut)
	}

	if code, out, errOut := c.run("unannounce", "--key", dearKey, "--relay", r.URL); code != 0 || !strings.Contains(out, "announcement") {
		t.Fatalf("unannounce: %d %q %q", code, out, errOut)
	}
	discoverJSON(t, c, func(s []discovery.Server) bool {
		for _, srv := range s {
			if srv.Pubkey.Hex() == dearReady.Pubkey {
				return false
			}
		}
		return true
	}, "--relay", r.URL)

	if code, _, errOut := c.run("call", "--schema", strings.Repeat("0", 64), "add", "--relay", r.URL); code != exitProtocol || !strings.Contains(errOut, "no server announces") {
		t.Errorf("unknown schema: %d %s", code, errOut)
	}
	if code, _, errOut := c.run("call", "--schema", hash, "subtract", "--relay", r.URL, "--trust-policy", "any"); code != exitLocal || !strings.Contains(errOut, `is the tool "add"`) {
		t.Errorf("wrong tool name: %d %s", code, errOut)
	}
}

func TestDiscover_BadInput(t *testing.T) {
	c := newCLI(t)
	r := relaytest.Start(t, relay.Options{})
	for _, args := range [][]string{
		{"discover", "--max-price", "-1", "--relay", r.URL},
		{"discover", "extra", "--relay", r.URL},
		{"gateway", "--relay", r.URL, "--price", "add=10", "--", demoServer(t)},
		{"unannounce", "--relay", r.URL}, // no key yet
	} {
		if code, _, errOut := c.run(args...); code != exitLocal || errOut == "" {
			t.Errorf("%v: code %d, stderr %q", args, code, errOut)
		}
	}
	if code, _, errOut := c.run("discover", "--relay", r.URL); code != 0 || !strings.Contains(errOut, "no servers found") {
		t.Errorf("an empty relay: %d %q", code, errOut)
	}
}

// discover --watch --json prints a server when it announces itself and a
// removal when it withdraws, one JSON object per line.
func TestDiscoverWatch(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	// Whether the gateway's announcements come before the watch's first
	// query or after it, they are printed the same way (a line each), so
	// nothing needs to wait for the watch to be live.
	watch := startCVM(t, c, "discover", "--watch", "--json", "--relay", r.URL)
	key := filepath.Join(t.TempDir(), "key")
	if code, _, errOut := c.run("keygen", "--out", key); code != 0 {
		t.Fatal(errOut)
	}
	gw := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--announce", "--unannounce-on-exit", "--", demoServer(t))
	var ready gatewayReady
	gw.ReadyLine(t, &ready)

	lines := readLines(t, watch.Stdout)
	next := func(want func(map[string]any) bool) {
		t.Helper()
		timeout := time.After(testwait.Timeout(20 * time.Second))
		for {
			select {
			case line, ok := <-lines:
				var obj map[string]any
				if !ok || json.Unmarshal([]byte(line), &obj) != nil {
					t.Fatalf("watch output %q; stderr %s", line, watch.Stderr)
				}
				if want(obj) {
					return
				}
			case <-timeout:
				t.Fatalf("the watch never printed the expected line; stderr %s", watch.Stderr)
			}
		}
	}
	next(func(o map[string]any) bool { return o["pubkey"] == ready.Pubkey && o["name"] == "cvm demo server" })
	// --unannounce-on-exit: stopping the gateway withdraws it.
	if code := gw.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("gateway exit %d: %s", code, gw.Stderr)
	}
	next(func(o map[string]any) bool { return o["pubkey"] == ready.Pubkey && o["removed"] == true })
}
