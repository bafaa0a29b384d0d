package room_test

// The conformance suite: every MUST of the v0 spec, the spec's examples and
// the reference transcripts (notes §3), and each decision docs/mcpx.md
// records for the spec's ambiguities. Regressions for the reference
// gateway's bugs are in regression_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

func TestGateway_WelcomeInSpecShapeComesFirst(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		g.Join("room:alpha", "robot-alpha", gatewaytest.WithName("Robot Alpha"), gatewaytest.WithKind(mcpx.ParticipantRobot))
		c := g.Dial("room:alpha", "coordinator", gatewaytest.WithName("Coordinator"))
		w := c.Read()
		if w.Protocol != mcpx.Protocol || w.From != mcpx.GatewayID || w.Kind != mcpx.KindSystem || w.To != nil || w.CorrelationID != "" || w.Seq != 0 {
			t.Fatalf("welcome envelope %s", w)
		}
		var p struct {
			Event        string             `json:"event"`
			Participant  mcpx.Participant   `json:"participant"`
			Participants []mcpx.Participant `json:"participants"`
			History      json.RawMessage    `json:"history"`
			Protocol     string             `json:"protocol"`
		}
		if err := json.Unmarshal(w.Payload, &p); err != nil {
			t.Fatal(err)
		}
		want := []mcpx.Participant{{ID: "robot-alpha", Name: "Robot Alpha", Kind: "robot", MCP: mcpx.MCPInfo{Version: "2025-06-18"}}}
		if p.Event != "welcome" || p.Participant.ID != "coordinator" || p.Protocol != mcpx.Protocol ||
			fmt.Sprint(p.Participants) != fmt.Sprint(want) {
			t.Fatalf("welcome payload %s", w.Payload)
		}
		if string(p.History) != `{"enabled":true,"limit":1000,"latest_seq":0}` {
			t.Fatalf("history %s", p.History)
		}
		if _, err := time.Parse(time.RFC3339, w.TS); err != nil {
			t.Fatalf("ts %q: %v", w.TS, err)
		}
	})
}

func TestGateway_JoinerDoesNotSeeItsOwnJoin(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob", gatewaytest.WithName("Bob"), gatewaytest.WithKind(mcpx.ParticipantHuman))
		j := a.Read()
		if j.Kind != mcpx.KindPresence || j.From != mcpx.GatewayID || j.Event() != mcpx.PresenceJoin || j.To != nil {
			t.Fatalf("alice got %s, want bob's join", j)
		}
		var p mcpx.Presence
		json.Unmarshal(j.Payload, &p)
		if p.Participant != (mcpx.Participant{ID: "bob", Name: "Bob", Kind: "human", MCP: mcpx.MCPInfo{Version: mcpx.DefaultMCPVersion}}) {
			t.Fatalf("join participant %+v", p.Participant)
		}
		gatewaytest.Barrier(t, a, b) // bob's next frame is the barrier, not his own join
	})
}

func TestGateway_ReferenceCompatWelcomeMatchesTranscript(t *testing.T) {
	bothModes(t, room.Options{Compat: room.CompatReference, WelcomeHistory: 2}, func(t *testing.T, g gatewaytest.Harness) {
		a := g.Dial("room:probe", "alice")
		// notes §3.2: the joiner gets its own presence join first...
		own := a.Read()
		if own.Kind != mcpx.KindPresence || own.Event() != mcpx.PresenceJoin || own.PresenceID() != "alice" {
			t.Fatalf("first frame %s, want alice's own join", own)
		}
		w := a.Read()
		if w.Kind != mcpx.KindSystem || len(w.To) != 1 || w.To[0] != "alice" {
			t.Fatalf("welcome %s", w)
		}
		for _, text := range []string{"one", "two", "three"} {
			a.Chat(text)
			a.Read()
		}
		b := g.Dial("room:probe", "bob")
		join := b.Read()
		if join.PresenceID() != "bob" {
			t.Fatalf("bob's first frame %s", join)
		}
		if seen := a.Read(); seen.ID != join.ID {
			t.Fatalf("alice saw join %s, bob saw %s: the same envelope goes to all", seen.ID, join.ID)
		}
		w = b.Read()
		var p map[string]json.RawMessage
		json.Unmarshal(w.Payload, &p)
		keys := []string{}
		for k := range p {
			keys = append(keys, k)
		}
		if len(p) != 5 || string(p["type"]) != `"welcome"` || string(p["participant_id"]) != `"bob"` || string(p["topic"]) != `"room:probe"` {
			t.Fatalf("reference welcome payload keys %v: %s", keys, w.Payload)
		}
		var participants []mcpx.Participant
		json.Unmarshal(p["participants"], &participants)
		if len(participants) != 1 || participants[0].ID != "alice" || participants[0].Kind != "agent" {
			t.Fatalf("participants %s (self excluded, alice present)", p["participants"])
		}
		var hist []gatewaytest.Msg
		json.Unmarshal(p["history"], &hist)
		if len(hist) != 2 || !strings.Contains(string(hist[0].Payload), "two") || !strings.Contains(string(hist[1].Payload), "three") {
			t.Fatalf("history tail %s: want the newest 2, oldest first", p["history"])
		}
	})
}

func TestGateway_LeaveOnClose(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob")
		a.Read() // bob's join
		b.Conn.Close(websocket.StatusNormalClosure, "bye")
		l := a.Read()
		if l.Kind != mcpx.KindPresence || l.Event() != mcpx.PresenceLeave || l.PresenceID() != "bob" || l.Field("reason") != string(mcpx.LeaveClosed) {
			t.Fatalf("got %s, want bob's leave", l)
		}
		var body struct{ Participants []mcpx.Participant }
		g.Get("/v0/topics/room:x/participants", g.Token("room:x", "alice"), &body)
		if len(body.Participants) != 1 || body.Participants[0].ID != "alice" {
			t.Fatalf("participants %+v", body.Participants)
		}
	})
}

func TestGateway_LivePeersGetHeartbeatsAndDeadPeersLeave(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{HeartbeatInterval: 30 * time.Millisecond, PongTimeout: 100 * time.Millisecond})
	a, _ := g.Join("room:x", "alice")
	// bob connects and then never reads: his side never answers a ping, as
	// a peer behind a dead network path would not.
	g.Dial("room:x", "bob")
	sawHeartbeat := false
	l := a.ReadUntil(func(m *gatewaytest.Msg) bool {
		if m.Kind == mcpx.KindPresence && m.Event() == mcpx.PresenceHeartbeat && m.PresenceID() == "alice" {
			sawHeartbeat = true
		}
		return m.Kind == mcpx.KindPresence && m.Event() == mcpx.PresenceLeave
	})
	if l.PresenceID() != "bob" || l.Field("reason") != string(mcpx.LeaveTimeout) {
		t.Fatalf("got %s, want bob's leave for a ping timeout", l)
	}
	if !sawHeartbeat {
		t.Fatal("alice, who answers pings, got no heartbeat of her own before bob left")
	}
}

func TestGateway_BroadcastReachesEveryoneIncludingSender(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob")
		a.Read()
		sent := a.Chat("hi all")
		for _, c := range []*gatewaytest.Client{a, b} {
			m := c.Read()
			if m.ID != sent["id"] || m.From != "alice" || m.To != nil || m.Seq != 1 {
				t.Fatalf("%s got %s", c.ID, m)
			}
			if !strings.Contains(string(m.Payload), `"text":"hi all"`) {
				t.Fatalf("payload %s", m.Payload)
			}
		}
	})
}

func TestGateway_DirectedRequestAndResponse(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		alice, _ := g.Join("room:x", "coordinator")
		bob, _ := g.Join("room:x", "robot-alpha")
		carol, _ := g.Join("room:x", "carol")
		alice.Read()
		alice.Read()
		bob.Read()
		// The spec's §13.1 pair, with its string JSON-RPC id.
		alice.SendRaw(`{"protocol":"mcp-x/v0","id":"env-1","ts":"2025-08-17T14:00:00Z","from":"coordinator","to":["robot-alpha"],"kind":"mcp","payload":{ "jsonrpc": "2.0", "id": "42", "method": "tools/call", "params": { "name": "robot.move", "arguments": {"x":1, "y":2} } }}`)
		req := bob.Read()
		if req.ID != "env-1" || string(req.Payload) != `{ "jsonrpc": "2.0", "id": "42", "method": "tools/call", "params": { "name": "robot.move", "arguments": {"x":1, "y":2} } }` {
			t.Fatalf("request arrived as %s", req)
		}
		bob.SendRaw(`{"protocol":"mcp-x/v0","id":"env-2","ts":"2025-08-17T14:00:00Z","from":"robot-alpha","to":["coordinator"],"kind":"mcp","correlation_id":"env-1","payload":{ "jsonrpc": "2.0", "id": "42", "result": { "status": "ok" } }}`)
		resp := alice.Read()
		if resp.ID != "env-2" || resp.CorrelationID != "env-1" || string(resp.Payload) != `{ "jsonrpc": "2.0", "id": "42", "result": { "status": "ok" } }` {
			t.Fatalf("response arrived as %s", resp)
		}
		// No echo to senders, nothing to the third party.
		gatewaytest.Barrier(t, carol, alice, bob)
	})
}

func TestGateway_EnforcesSpecMUSTsWithErrorEnvelopes(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob")
		a.Read()
		cases := []struct {
			name  string
			frame string
			code  mcpx.Code
			id    string
		}{
			{"from must match the identity", `{"protocol":"mcp-x/v0","id":"s1","ts":"2025-08-17T14:00:00Z","from":"bob","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"I am bob"}}}`, mcpx.CodeFromMismatch, "s1"},
			{"a request needs exactly one to (none)", `{"protocol":"mcp-x/v0","id":"s2","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`, mcpx.CodeRequestRecipients, "s2"},
			{"a request needs exactly one to (two)", `{"protocol":"mcp-x/v0","id":"s3","ts":"2025-08-17T14:00:00Z","from":"alice","to":["bob","carol"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`, mcpx.CodeRequestRecipients, "s3"},
			{"clients may not send presence", `{"protocol":"mcp-x/v0","id":"s4","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"presence","payload":{"event":"leave","participant":{"id":"bob"}}}`, mcpx.CodeReservedKind, "s4"},
			{"clients may not send system", `{"protocol":"mcp-x/v0","id":"s5","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"system","payload":{"event":"welcome","participant":{"id":"x"}}}`, mcpx.CodeReservedKind, "s5"},
			{"protocol must be mcp-x/v0", `{"protocol":"mcp-x/v1","id":"s6","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":{"jsonrpc":"2.0","method":"m"}}`, mcpx.CodeUnsupportedProtocol, "s6"},
			{"a response needs correlation_id", `{"protocol":"mcp-x/v0","id":"s7","ts":"2025-08-17T14:00:00Z","from":"alice","to":["bob"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}`, mcpx.CodeMissingCorrelation, "s7"},
			{"malformed JSON", `{'`, mcpx.CodeInvalidEnvelope, ""},
			{"payload must be an object", `{"protocol":"mcp-x/v0","id":"s8","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":[]}`, mcpx.CodeInvalidEnvelope, "s8"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a.SendRaw(c.frame)
				a.ExpectError(c.code, c.id)
			})
		}
		gatewaytest.Barrier(t, a, b) // bob received none of them
	})
}

// A frame the gateway cannot take (binary, or over MaxFrameBytes) is
// answered with an error envelope, and the connection stays.
func TestGateway_UnreadableFrameGetsAnErrorAndTheConnectionStays(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts room.Options
		send func(a *gatewaytest.Client)
		code mcpx.Code
	}{
		{"binary", room.Options{}, func(a *gatewaytest.Client) {
			a.Conn.Write(context.Background(), websocket.MessageBinary, []byte(`{}`))
		}, mcpx.CodeInvalidEnvelope},
		{"oversize", room.Options{MaxFrameBytes: 4096}, func(a *gatewaytest.Client) {
			a.Send(a.Env(nil, `{"jsonrpc":"2.0","method":"n","params":{"pad":"`+strings.Repeat("x", 5000)+`"}}`))
		}, mcpx.CodeTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gatewaytest.Start(t, tc.opts)
			a, _ := g.Join("room:x", "alice")
			tc.send(a)
			a.ExpectError(tc.code, "")
			gatewaytest.Barrier(t, a)
		})
	}
}

func TestGateway_OversizeBeyondTheHardLimitCloses(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{MaxFrameBytes: 1024})
	a, _ := g.Join("room:x", "alice")
	a.SendRaw(strings.Repeat(" ", 1024*room.HardFrameLimitFactor+1))
	_, err := a.TryRead(5 * time.Second)
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("read after a frame over the hard limit: %v, want close 1009", err)
	}
}

func TestGateway_RateLimitRepliesWithRetryAfter(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{RatePerSecond: 1, RateBurst: 3})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	a.Read()
	for i := 0; i < 3; i++ {
		a.Chat(fmt.Sprint("ok ", i))
		a.Read()
		b.Read()
	}
	over := a.Chat("over")
	e := a.ExpectError(mcpx.CodeRateLimited, over["id"].(string))
	retry, ok := e.Field("retry_after_ms").(float64)
	if !ok || retry < 1 || retry > 1000 {
		t.Fatalf("retry_after_ms %v, want 1..1000", e.Field("retry_after_ms"))
	}
}

func TestGateway_UnknownRecipientIsReportedNotDropped(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob")
		a.Read()
		e := a.Env([]string{"bob", "carol"}, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
		a.Send(e)
		if m := b.Read(); m.ID != e["id"] {
			t.Fatalf("bob got %s", m)
		}
		errEnv := a.ExpectError(mcpx.CodeUnknownRecipient, e["id"].(string))
		if !strings.Contains(errEnv.Field("message").(string), "carol") {
			t.Fatalf("error does not name carol: %s", errEnv)
		}
	})
}

func TestGateway_TopicVisibilityShowsDirectedTrafficToAll(t *testing.T) {
	bothModes(t, room.Options{Visibility: room.VisibilityTopic}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob")
		c, _ := g.Join("room:x", "carol")
		a.Read()
		a.Read()
		b.Read()
		req := a.Env([]string{"bob"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		a.Send(req)
		for _, x := range []*gatewaytest.Client{b, c} {
			if m := x.Read(); m.ID != req["id"] || len(m.To) != 1 || m.To[0] != "bob" {
				t.Fatalf("%s got %s", x.ID, m)
			}
		}
		gatewaytest.Barrier(t, b, a, c) // no echo to alice
		hist, _ := g.HistoryPage("room:x", "carol", "")
		if len(hist) != 2 || hist[1].ID != req["id"] {
			t.Fatalf("carol's history %v, want the directed request too", gatewaytest.IDs(hist))
		}
	})
}

func TestGateway_HistoryFollowsDirectedVisibility(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		b, _ := g.Join("room:x", "bob")
		a.Read()
		chat := a.Chat("public")
		a.Read()
		b.Read()
		dm := a.Env([]string{"bob"}, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
		a.Send(dm)
		b.Read()
		if h, _ := g.HistoryPage("room:x", "carol", ""); fmt.Sprint(gatewaytest.IDs(h)) != fmt.Sprint([]string{chat["id"].(string)}) {
			t.Fatalf("carol sees %v, want only the broadcast", gatewaytest.IDs(h))
		}
		for _, who := range []string{"alice", "bob"} {
			if h, _ := g.HistoryPage("room:x", who, ""); len(h) != 2 || h[0].ID != dm["id"] {
				t.Fatalf("%s sees %v, want the direct message first", who, gatewaytest.IDs(h))
			}
		}
	})
}

func TestGateway_HistoryPagingWithSeqAndIDCursors(t *testing.T) {
	bothModes(t, room.Options{}, func(t *testing.T, g gatewaytest.Harness) {
		a, _ := g.Join("room:x", "alice")
		var sent []string
		for i := 1; i <= 6; i++ {
			sent = append(sent, a.Chat(fmt.Sprint("m", i))["id"].(string))
			if m := a.Read(); m.Seq != uint64(i) {
				t.Fatalf("live seq %d, want %d", m.Seq, i)
			}
		}
		check := func(query string, want []string, wantMore bool) {
			t.Helper()
			h, more := g.HistoryPage("room:x", "alice", query)
			if fmt.Sprint(gatewaytest.IDs(h)) != fmt.Sprint(want) || more != wantMore {
				t.Errorf("%s: %v more=%v, want %v more=%v", query, gatewaytest.IDs(h), more, want, wantMore)
			}
		}
		check("?limit=2", []string{sent[5], sent[4]}, true)
		check("?limit=2&before=5", []string{sent[3], sent[2]}, true)
		check("?limit=2&before="+sent[4], []string{sent[3], sent[2]}, true)
		check("?limit=10&before="+sent[0], []string{}, false)
		check("?limit=2&after=2", []string{sent[3], sent[2]}, true)
		check("?limit=2&after="+sent[1], []string{sent[3], sent[2]}, true)
		check("?limit=10&after="+sent[5], []string{}, false)
		check("?after=1&before=4", []string{sent[2], sent[1]}, false)
		h, _ := g.HistoryPage("room:x", "alice", "?limit=1")
		if h[0].Seq != 6 {
			t.Fatalf("history entries carry seq: %s", h[0].Raw)
		}

		tok := g.Token("room:x", "alice")
		for query, code := range map[string]mcpx.Code{
			"?limit=1001":                   mcpx.CodeBadRequest,
			"?limit=0":                      mcpx.CodeBadRequest,
			"?limit=x":                      mcpx.CodeBadRequest,
			"?before=env-nope":              mcpx.CodeUnknownCursor,
			"?after=env-nope":               mcpx.CodeUnknownCursor,
			"?before=999999999999999999999": mcpx.CodeBadRequest,
		} {
			var body room.ErrorBody
			status, _ := g.Get("/v0/topics/room:x/history"+query, tok, &body)
			if status != 400 || body.Code != code || body.Error == "" {
				t.Errorf("%s: %d %+v, want 400 %s", query, status, body, code)
			}
		}
	})
}

func TestGateway_HistoryTimeCursor(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second).Add(-time.Hour) // within the retention age
	clock := make(chan time.Time, 1)
	clock <- now
	tick := func() time.Time { t := <-clock; clock <- t; return t }
	g := gatewaytest.Start(t, room.Options{Now: tick})
	a, _ := g.Join("room:x", "alice")
	first := a.Chat("early")
	a.Read()
	<-clock
	clock <- now.Add(time.Minute)
	second := a.Chat("late")
	a.Read()
	h, _ := g.HistoryPage("room:x", "alice", "?before="+now.Add(30*time.Second).Format(time.RFC3339))
	if fmt.Sprint(gatewaytest.IDs(h)) != fmt.Sprint([]string{first["id"].(string)}) {
		t.Fatalf("before a time: %v", gatewaytest.IDs(h))
	}
	h, _ = g.HistoryPage("room:x", "alice", "?after="+now.Add(30*time.Second).Format(time.RFC3339))
	if fmt.Sprint(gatewaytest.IDs(h)) != fmt.Sprint([]string{second["id"].(string)}) {
		t.Fatalf("after a time: %v", gatewaytest.IDs(h))
	}
}

func TestGateway_HistorySurvivesRestartAndEmptyTopics(t *testing.T) {
	dir := t.TempDir()
	keys := gatewaytest.NewKeys(t)
	path := filepath.Join(dir, "history.db")
	st, err := history.Open(path, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := gatewaytest.Start(t, room.Options{Tokens: keys, History: st})
	a, _ := g.Join("room:x", "alice")
	sent := a.Chat("before the restart")
	a.Read()
	a.Conn.Close(websocket.StatusNormalClosure, "")
	g.Server.Close()
	st.Close()

	st, err = history.Open(path, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g = gatewaytest.Start(t, room.Options{Tokens: keys, History: st})
	var topics struct{ Topics []string }
	g.Get("/v0/topics", g.Token("room:x", "alice"), &topics)
	if fmt.Sprint(topics.Topics) != "[room:x]" {
		t.Fatalf("topics after a restart with nobody present: %v", topics.Topics)
	}
	h, _ := g.HistoryPage("room:x", "bob", "")
	if len(h) != 1 || h[0].ID != sent["id"] || h[0].Seq != 1 {
		t.Fatalf("history after the restart: %v", gatewaytest.IDs(h))
	}
	b, w := g.Join("room:x", "bob")
	if !strings.Contains(string(w.Payload), `"latest_seq":1`) {
		t.Fatalf("welcome after the restart: %s", w)
	}
	b.Chat("after")
	if m := b.Read(); m.Seq != 2 {
		t.Fatalf("seq after the restart %d, want 2", m.Seq)
	}
}

func TestGateway_UpgradeRefusalsAreHTTPErrorsWithJSON(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{MaxParticipants: 1, AllowedOrigins: []string{"*.example.com"}})
	bearerH := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	g.Join("room:full", "first")
	stale := room.ForgeExpired(g.Keys, "alice", "room:x")
	cases := []struct {
		name   string
		query  string
		header http.Header
		protos []string
		status int
		code   mcpx.Code
	}{
		{"no topic", "", bearerH(g.Token("room:x", "alice")), nil, 400, mcpx.CodeBadRequest},
		{"bad topic name", "?topic=a/b", bearerH(g.Token("room:x", "alice")), nil, 400, mcpx.CodeBadRequest},
		{"no token", "?topic=room:x", nil, nil, 401, mcpx.CodeUnauthorized},
		{"token in the query", "?topic=room:x&token=" + g.Token("room:x", "alice"), nil, nil, 401, mcpx.CodeUnauthorized},
		{"bad token", "?topic=room:x", bearerH("not.a.token"), nil, 401, mcpx.CodeUnauthorized},
		{"wrong scheme", "?topic=room:x", http.Header{"Authorization": {"Basic Zm9v"}}, nil, 401, mcpx.CodeUnauthorized},
		{"expired token", "?topic=room:x", bearerH(stale), nil, 401, mcpx.CodeUnauthorized},
		{"token for another topic", "?topic=room:y", bearerH(g.Token("room:x", "alice")), nil, 403, mcpx.CodeForbidden},
		{"foreign origin", "?topic=room:x", http.Header{"Authorization": {"Bearer " + g.Token("room:x", "alice")}, "Origin": {"https://evil.test"}}, nil, 403, mcpx.CodeBadOrigin},
		{"topic full", "?topic=room:full", bearerH(g.Token("room:full", "second")), nil, 403, mcpx.CodeTopicFull},
		{"unsupported subprotocol", "?topic=room:x", bearerH(g.Token("room:x", "alice")), []string{"mcp-x.v1"}, 400, mcpx.CodeUnsupportedProtocol},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := g.DialStatus(c.query, c.header, c.protos...)
			if status != c.status || body["code"] != string(c.code) || body["error"] == "" {
				t.Fatalf("got %d %v, want %d %s", status, body, c.status, c.code)
			}
		})
	}
	// Allowed: an origin on the allowlist, the request's own host, and the
	// same participant replacing itself in a full topic.
	for _, origin := range []string{"https://app.example.com", "http://" + g.Addr.String()} {
		h := bearerH(g.Token("room:x", "alice"))
		h.Set("Origin", origin)
		if status, body := g.DialStatus("?topic=room:x", h, mcpx.Subprotocol); status != 0 {
			t.Fatalf("origin %s refused: %d %v", origin, status, body)
		}
	}
	if status, body := g.DialStatus("?topic=room:full", bearerH(g.Token("room:full", "first")), mcpx.Subprotocol); status != 0 {
		t.Fatalf("reconnect into a full topic refused: %d %v", status, body)
	}
}

func TestGateway_BrowserBearerSubprotocol(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	ctx, cancel := testwait.Context(t, gatewaytest.Patience)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, g.WSURL+"?topic=room:x", &websocket.DialOptions{
		Subprotocols: []string{mcpx.Subprotocol, room.BearerPrefix + g.Token("room:x", "alice")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != mcpx.Subprotocol {
		t.Fatalf("selected %q: the token must never be echoed", conn.Subprotocol())
	}
	_, data, err := conn.Read(ctx)
	if err != nil || !strings.Contains(string(data), `"event":"welcome"`) {
		t.Fatalf("first frame %s %v", data, err)
	}
}

func TestGateway_RESTEndpoints(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	g.Join("room:a", "alice", gatewaytest.WithName("Alice"))
	g.Join("room:b", "bob")
	var topics struct{ Topics []string }
	if code, _ := g.Get("/v0/topics", g.Token("room:a", "alice"), &topics); code != 200 || fmt.Sprint(topics.Topics) != "[room:a]" {
		t.Fatalf("a token for room:a lists %v (%d); topics it does not name must stay hidden", topics.Topics, code)
	}
	g.Get("/v0/topics", g.Token("", "alice", gatewaytest.WithTopics("room:a", "room:b", "room:c")), &topics)
	if fmt.Sprint(topics.Topics) != "[room:a room:b]" {
		t.Fatalf("multi-topic token lists %v", topics.Topics)
	}
	var parts struct{ Participants []mcpx.Participant }
	g.Get("/v0/topics/room:a/participants", g.Token("room:a", "carol"), &parts)
	if len(parts.Participants) != 1 || parts.Participants[0].Name != "Alice" {
		t.Fatalf("participants %+v", parts.Participants)
	}
	var e room.ErrorBody
	if code, h := g.Get("/v0/topics/room:b/participants", "", &e); code != 401 || e.Code != mcpx.CodeUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d %+v", code, e)
	}
	if code, _ := g.Get("/v0/topics/room:b/participants", g.Token("room:a", "alice"), &e); code != 403 || e.Code != mcpx.CodeForbidden {
		t.Fatalf("wrong topic: %d %+v", code, e)
	}
	if code, _ := g.Get("/v0/ws?topic=room:a", g.Token("room:a", "alice"), &e); code != 426 || e.Code != mcpx.CodeBadRequest {
		t.Fatalf("plain GET of the WebSocket endpoint: %d %+v", code, e)
	}
	if code, _ := g.Get("/v0/nope", "", &e); code != 404 || e.Code != mcpx.CodeNotFound {
		t.Fatalf("unknown path: %d %+v", code, e)
	}
	var health map[string]any
	if code, _ := g.Get("/healthz", "", &health); code != 200 || health["status"] != "ok" || health["protocol"] != mcpx.Protocol {
		t.Fatalf("healthz %d %v", code, health)
	}
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, name := range []string{"cvm_mcpx_connections 2", "cvm_mcpx_participants 2", "cvm_mcpx_deliveries_total"} {
		if !strings.Contains(b.String(), name) {
			t.Errorf("metrics lack %q", name)
		}
	}
}

func TestGateway_HistoryDisabled(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{History: gatewaytest.NoHistory})
	_, w := g.Join("room:x", "alice")
	if !strings.Contains(string(w.Payload), `"history":{"enabled":false,"limit":0,"latest_seq":0}`) {
		t.Fatalf("welcome %s", w)
	}
	var e room.ErrorBody
	if code, _ := g.Get("/v0/topics/room:x/history", g.Token("room:x", "alice"), &e); code != 404 {
		t.Fatalf("history when disabled: %d %+v", code, e)
	}
}

func TestGateway_CloseSendsGoingAway(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	a, _ := g.Join("room:x", "alice")
	done := make(chan error, 1)
	go func() { done <- g.Server.Close() }()
	_, err := a.TryRead(5 * time.Second)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("read during shutdown: %v, want close 1001", err)
	}
	if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

func TestGateway_ForwardsCanonicalEnvelopes(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	a.Read()
	// A duplicate from key: encoding/json keeps the last, and so must every
	// receiver, whatever its JSON parser does with duplicates.
	a.SendRaw(`{"protocol":"mcp-x/v0","id":"dup","ts":"2025-08-17T14:00:00Z","from":"bob","from":"alice","kind":"mcp","payload":{"jsonrpc":"2.0","method":"n"},"extra":"dropped","to":[]}`)
	m := b.Read()
	if string(m.Raw) != `{"protocol":"mcp-x/v0","id":"dup","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":{"jsonrpc":"2.0","method":"n"},"seq":1}` {
		t.Fatalf("forwarded %s", m.Raw)
	}
}
