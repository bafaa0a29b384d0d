package participant

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Another participant calls the chat tools of seed 001 §8.2 on a client's
// default server, through the gateway: chat.say makes the callee say it
// (its own event names the caller), presence.get lists who is here, and
// bad arguments are tool errors that say nothing.
func TestClient_DefaultServerChatTools(t *testing.T) {
	g := startGateway(t, room.Options{})
	_, aev := g.client("room:x", "alice", Options{})
	b, bev := g.client("room:x", "bob", Options{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bob"}, nil).Connect(testCtx(t), b.PeerTransport("alice"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "chat.say,presence.get" {
		t.Fatalf("alice's tools %v", names)
	}

	for _, bad := range []map[string]any{
		{},                                   // no text
		{"text": 5},                          // not a string
		{"text": ""},                         // nothing to say
		{"text": "x", "format": "html"},      // not a format of §8.1
		{"text": []string{"a"}, "format": 1}, // everything wrong
	} {
		res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "chat.say", Arguments: bad})
		if err != nil || !res.IsError {
			t.Fatalf("chat.say %v: %+v %v; want a tool error", bad, res, err)
		}
	}
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "chat.say", Arguments: map[string]any{"text": "**hello** from\nbob", "format": "markdown"}})
	if err != nil || res.IsError {
		t.Fatalf("chat.say: %+v %v", res, err)
	}
	var said ChatSayResult
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &said) != nil || said.ID == "" {
		t.Fatalf("chat.say result %+v", res.StructuredContent)
	}
	// The first chat bob sees is the good one: the bad calls said nothing.
	e := bev.wait(t, "alice's chat", func(e Event) bool { return e.Type == EventChat })
	if e.Chat.From != "alice" || e.Chat.Text != "**hello** from\nbob" || e.Chat.Format != FormatMarkdown || e.Chat.ID != said.ID || e.Chat.SaidFor != "" {
		t.Fatalf("bob saw %+v", e.Chat)
	}
	mine := aev.wait(t, "alice's echo", func(e Event) bool { return e.Type == EventChat })
	if !mine.Chat.Mine || mine.Chat.SaidFor != "bob" || mine.Chat.Format != FormatMarkdown {
		t.Fatalf("alice's own event %+v: want it marked as said for bob", mine.Chat)
	}

	res, err = cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "presence.get"})
	if err != nil || res.IsError {
		t.Fatalf("presence.get: %+v %v", res, err)
	}
	var pres PresenceResult
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &pres) != nil || len(pres.Participants) != 2 ||
		pres.Participants[0].ID != "alice" || pres.Participants[1].ID != "bob" {
		t.Fatalf("presence.get %+v", res.StructuredContent)
	}
	if len(res.Content) != 1 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"id":"bob"`) {
		t.Fatalf("presence.get content %+v: want the list as text too", res.Content)
	}
	res, err = cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "presence.get", Arguments: map[string]any{"who": 1}})
	if err != nil || !res.IsError {
		t.Fatalf("presence.get with arguments: %+v %v; want a tool error", res, err)
	}
}

func TestClient_SayRefusesUnknownFormats(t *testing.T) {
	g := startGateway(t, room.Options{})
	a, _ := g.client("room:x", "alice", Options{})
	if _, err := a.Say(testCtx(t), "hi", "html"); err == nil || !strings.Contains(err.Error(), "html") {
		t.Fatalf("Say html: %v", err)
	}
}

// Seed 002's shutdown is answered by the client with an empty result,
// whatever its server, and ends nothing: the peer can go on calling.
func TestClient_ShutdownIsAcknowledged(t *testing.T) {
	g := startGateway(t, room.Options{})
	g.client("room:x", "alice", Options{})
	g.client("room:x", "carol", Options{Server: SDKServer(echoServer(t, nil))})
	b, _ := g.client("room:x", "bob", Options{})
	for _, peer := range []string{"alice", "carol"} {
		res, err := b.Request(testCtx(t), peer, "shutdown", nil)
		if err != nil || string(res) != "{}" {
			t.Fatalf("shutdown to %s: %s %v; want {}", peer, res, err)
		}
		if _, err := b.Request(testCtx(t), peer, "tools/list", map[string]any{}); err != nil {
			t.Fatalf("%s after shutdown: %v", peer, err)
		}
	}
}

// Leaving is not losing the connection: Close reports no disconnection
// (cvm room chat printed "disconnected ...; reconnecting" on /quit).
func TestClient_CloseReportsNoDisconnection(t *testing.T) {
	g := startGateway(t, room.Options{})
	for range 20 {
		c, ev := g.client("room:x", "alice", Options{})
		c.Close()
		for _, e := range ev.snapshot() {
			if e.Type == EventDisconnected {
				t.Fatalf("Close reported %+v", e)
			}
		}
	}
}
