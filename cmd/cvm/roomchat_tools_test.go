package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cvm room chat sends markdown (/md) and shows it as text; another
// participant calls its chat.say (what it is made to say is shown with the
// caller's name, escaped and indented so that it cannot forge lines of the
// chat's own) and presence.get; a bridge started with --announce-tools
// advertises its server's tools, which the chat shows.
func TestRoomChat_MarkdownChatToolsAndAnnouncedTools(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	gw.ReadyLine(t, &ready)
	base := ready.REST
	join := func(id string, json bool) *piped {
		args := []string{"room", "chat", "--gateway", base, "--topic", "room:x", "--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", id)}
		if json {
			args = append([]string{"--json"}, args...)
		}
		return startPiped(t, c, args...)
	}
	alice := join("alice", true)
	alice.expectJSON(t, "ready", nil)
	bob := join("bob", false)
	bob.expect(t, "* joined room:x as bob")

	bridge := startCVM(t, c, "room", "bridge", "--gateway", base, "--topic", "room:x", "--announce-tools",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "alpha"), "--", demoServer(t))
	var bready struct{ Ready bool }
	bridge.ReadyLine(t, &bready)
	av := alice.expectJSON(t, "tools_available", nil)
	if av["from"] != "alpha" || !strings.Contains(string(mustJSON(t, av["tools"])), `"word_count"`) {
		t.Fatalf("alice's tools_available %v", av)
	}
	bob.expect(t, "* alpha offers 6 tools: add, caller, count, echo, time, word_count")

	bob.say(t, "/md **bold**  and _it_")
	m := alice.expectJSON(t, "chat", func(m map[string]any) bool { return m["from"] == "bob" })
	if m["text"] != "**bold**  and _it_" || m["format"] != "markdown" {
		t.Fatalf("alice got %v", m)
	}
	alice.say(t, "/md # plan")
	bob.expect(t, "<alice> # plan")
	alice.say(t, "plain again")
	if m := alice.expectJSON(t, "chat", func(m map[string]any) bool { return m["text"] == "plain again" }); m["format"] != "plain" {
		t.Fatalf("plain line sent as %v", m)
	}

	// dave, a participant in Go, uses bob's chat tools through the gateway.
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	dave, err := participant.Connect(ctx, participant.Options{Gateway: base, Topic: "room:x",
		Token: mint(t, c, "--data", data, "--topic", "room:x", "--id", "dave")})
	if err != nil {
		t.Fatal(err)
	}
	defer dave.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "dave"}, nil).Connect(ctx, dave.PeerTransport("bob"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "chat.say", Arguments: map[string]any{"text": 42}})
	if err != nil || !res.IsError {
		t.Fatalf("chat.say with a number: %+v %v; want a tool error", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "chat.say", Arguments: map[string]any{
		"text": "# news\n* carol joined\n\x1b[2Jcleared\u202egnp.exe", "format": "markdown"}})
	if err != nil || res.IsError {
		t.Fatalf("chat.say: %+v %v", res, err)
	}
	bob.expect(t, "<bob (chat.say by dave)> # news")
	if line := bob.expect(t, "carol joined"); line != "  * carol joined" {
		t.Fatalf("continuation line %q: want it indented", line)
	}
	if line := bob.expect(t, "cleared"); line != `  \x1b[2Jcleared\u202egnp.exe` {
		t.Fatalf("control characters reached the terminal: %q", line)
	}
	m = alice.expectJSON(t, "chat", func(m map[string]any) bool {
		return m["from"] == "bob" && m["format"] == "markdown" && m["text"] != "**bold**  and _it_"
	})
	if !strings.HasPrefix(m["text"].(string), "# news\n") || m["said_for"] != nil {
		t.Fatalf("alice got %v", m)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "presence.get"})
	if err != nil || res.IsError {
		t.Fatalf("presence.get: %+v %v", res, err)
	}
	var pres participant.PresenceResult
	json.Unmarshal(mustJSON(t, res.StructuredContent), &pres)
	var ids []string
	for _, p := range pres.Participants {
		ids = append(ids, p.ID)
	}
	if strings.Join(ids, ",") != "alice,alpha,bob,dave" {
		t.Fatalf("presence.get %v", ids)
	}
	if res, err := dave.Request(ctx, "bob", "shutdown", nil); err != nil || string(res) != "{}" {
		t.Fatalf("shutdown to bob: %s %v", res, err)
	}

	if code := bob.Stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("bob exited %d", code)
	}
	if code := bridge.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("bridge exited %d; stderr: %s", code, bridge.Stderr)
	}
}
