package room

// Regressions for the reference gateway's bugs (notes §3 and §11). Each
// test is named for the bug it keeps fixed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
)

func TestReferenceBug_DuplicateIDReplacesOldConnectionWithoutGhost(t *testing.T) {
	g := startGateway(t, Options{RatePerSecond: 0.001, RateBurst: 3})
	old, _ := g.join("room:x", "alice")
	bob, _ := g.join("room:x", "bob")
	old.read() // bob's join
	old.chat("1")
	old.chat("2")
	old.read()
	old.read()
	bob.read()
	bob.read()

	fresh, w := g.join("room:x", "alice")
	if !strings.Contains(string(w.Payload), `"participants":[{"id":"bob"`) {
		t.Fatalf("new connection's welcome %s", w)
	}
	// The old socket is closed with the reference's status and reason.
	_, err := old.tryRead(5 * time.Second)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "Duplicate connection - disconnecting old session" {
		t.Fatalf("old connection: %v", err)
	}
	// Others see the old session leave, then the new one join: a roster
	// built from presence ends with alice present (the reference sends join
	// then leave, and alice vanishes).
	leave, join := bob.read(), bob.read()
	if leave.event() != mcpx.PresenceLeave || leave.presenceID() != "alice" || leave.field("reason") != string(mcpx.LeaveReplaced) ||
		join.event() != mcpx.PresenceJoin || join.presenceID() != "alice" {
		t.Fatalf("bob saw\n%s\n%s\nwant alice's leave (replaced) then join", leave, join)
	}
	var parts struct{ Participants []mcpx.Participant }
	g.get("/v0/topics/room:x/participants", g.token("room:x", "bob"), &parts)
	if len(parts.Participants) != 2 || parts.Participants[0].ID != "alice" || parts.Participants[1].ID != "bob" {
		t.Fatalf("roster %+v, want alice and bob", parts.Participants)
	}
	// The new connection gets directed messages...
	dm := bob.env([]string{"alice"}, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
	bob.send(dm)
	if m := fresh.read(); m.ID != dm["id"] {
		t.Fatalf("new alice got %s", m)
	}
	// ...and shares the old one's rate limit: one token left of three.
	fresh.chat("3")
	fresh.read()
	bob.read()
	over := fresh.chat("4")
	fresh.expectError(mcpx.CodeRateLimited, over["id"].(string))
}

func TestReferenceBug_SpoofedPresenceAndSystemAreNeverRelayed(t *testing.T) {
	g := startGateway(t, Options{})
	mallory, _ := g.join("room:x", "mallory")
	bob, _ := g.join("room:x", "bob")
	carol, _ := g.join("room:x", "carol")
	mallory.read()
	mallory.read()
	bob.read()
	mallory.sendRaw(`{"protocol":"mcp-x/v0","id":"fake-leave","ts":"2025-08-17T14:00:00Z","from":"mallory","kind":"presence","payload":{"event":"leave","participant":{"id":"bob"}}}`)
	mallory.expectError(mcpx.CodeReservedKind, "fake-leave")
	mallory.sendRaw(`{"protocol":"mcp-x/v0","id":"fake-welcome","ts":"2025-08-17T14:00:00Z","from":"mallory","kind":"system","payload":{"type":"welcome","participant_id":"x"}}`)
	mallory.expectError(mcpx.CodeReservedKind, "fake-welcome")
	barrier(t, mallory, bob, carol)
	if h, _ := g.historyPage("room:x", "bob", ""); len(h) != 1 {
		t.Fatalf("history holds %v, want only the barrier", ids(h))
	}
}

func TestReferenceBug_BeforeTheOldestIDIsAnEmptyPage(t *testing.T) {
	g := startGateway(t, Options{})
	a, _ := g.join("room:x", "alice")
	first := a.chat("oldest")
	a.read()
	a.chat("newer")
	a.read()
	if h, more := g.historyPage("room:x", "alice", "?before="+first["id"].(string)); len(h) != 0 || more {
		t.Fatalf("before=<oldest id> returned %v; the reference returns the newest page here", ids(h))
	}
	var e errorBody
	if code, _ := g.get("/v0/topics/room:x/history?before=no-such-id", g.token("room:x", "alice"), &e); code != 400 || e.Code != mcpx.CodeUnknownCursor {
		t.Fatalf("unknown cursor: %d %+v; the reference silently ignores it", code, e)
	}
}

func TestReferenceBug_NoSilentDrops(t *testing.T) {
	// notes §3.9: 12 chats in a burst, 9 delivered, 3 gone without a word.
	g := startGateway(t, Options{RatePerSecond: 0.001, RateBurst: 9})
	a, _ := g.join("room:x", "alice")
	b, _ := g.join("room:x", "bob")
	a.read()
	var sent []string
	for i := 0; i < 12; i++ {
		sent = append(sent, a.chat(fmt.Sprint("burst-", i))["id"].(string))
	}
	delivered, refused := 0, 0
	for i := 0; i < 12; i++ {
		m := a.read()
		switch {
		case m.Kind == mcpx.KindMCP && m.ID == sent[i]:
			delivered++
		case m.Kind == mcpx.KindSystem && m.event() == "error" && m.CorrelationID == sent[i]:
			refused++
		default:
			t.Fatalf("frame %d: %s", i, m)
		}
	}
	if delivered != 9 || refused != 3 {
		t.Fatalf("delivered %d refused %d: every frame must be delivered or answered", delivered, refused)
	}
	for i := 0; i < 9; i++ {
		b.read()
	}
	// notes §3.6: a from mismatch is dropped with only a server log.
	g2 := startGateway(t, Options{})
	x, _ := g2.join("room:x", "alice")
	x.sendRaw(`{"protocol":"mcp-x/v0","id":"spoof","ts":"2025-08-17T14:00:00Z","from":"bob","kind":"mcp","payload":{"jsonrpc":"2.0","method":"n"}}`)
	x.expectError(mcpx.CodeFromMismatch, "spoof")
}

func TestReferenceBug_ErrorsAreEnvelopesNotBareJSON(t *testing.T) {
	// notes §3.7: the reference answers {"error":"Invalid message format",...},
	// which its own client drops as "Invalid protocol version: undefined".
	g := startGateway(t, Options{})
	a, _ := g.join("room:x", "alice")
	for _, frame := range []string{`{'`, `{"protocol":"mcp-x/v1"}`, `{"protocol":"mcp-x/v0","id":"p","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":[]}`} {
		a.sendRaw(frame)
		m := a.read()
		if m.Protocol != mcpx.Protocol || m.ID == "" || m.TS == "" || m.Kind != mcpx.KindSystem || m.From != mcpx.GatewayID || m.event() != "error" {
			t.Fatalf("reply to %s is not an error envelope: %s", frame, m)
		}
		if strings.Contains(string(m.raw), `"details"`) {
			t.Fatalf("reference-style details field: %s", m)
		}
	}
}

func TestReferenceBug_HistoryOutlivesAnEmptyTopic(t *testing.T) {
	g := startGateway(t, Options{})
	a, _ := g.join("room:x", "alice")
	sent := a.chat("still here later")
	a.read()
	a.conn.Close(websocket.StatusNormalClosure, "")
	testwait.Eventually(t, 10*time.Second, "the topic to empty", func() bool { return g.existingTopic("room:x").size() == 0 })
	if h, _ := g.historyPage("room:x", "bob", ""); len(h) != 1 || h[0].ID != sent["id"] {
		t.Fatalf("history of an empty topic: %v", ids(h))
	}
}

func TestReferenceBug_SlowConsumerIsDroppedAndNeverStallsTheTopic(t *testing.T) {
	// The reference has no send-queue bound: one participant that stops
	// reading grows the gateway's memory without limit.
	g := startGateway(t, Options{SendQueueBytes: 1 << 20, SendQueueFrames: 1 << 20})
	a, _ := g.join("room:x", "alice")
	c, _ := g.join("room:x", "carol")
	g.dialSlow("room:x", "sloth") // never reads
	a.read()
	a.read()
	c.read()
	pad := strings.Repeat("x", 16<<10)
	const n = 1000
	// alice keeps at most 8 envelopes in flight, released by her own echoes,
	// so that the fast readers (slowed by the race detector) stay far below
	// the 1 MiB bound while sloth's backlog (16 MiB in all) passes it.
	window := make(chan struct{}, 8)
	errs := make(chan error, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			window <- struct{}{}
			b, _ := json.Marshal(a.env(nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"i":`+fmt.Sprint(i)+`,"pad":"`+pad+`"}}`))
			if err := a.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
				errs <- fmt.Errorf("alice: write %d: %v", i, err)
				return
			}
		}
	}()
	// Both fast readers read concurrently: either one pausing would make it
	// a slow consumer too.
	leaves := make(chan *msg, 2)
	for _, x := range []*client{a, c} {
		go func() {
			got := 0
			var left *msg
			for got < n || left == nil {
				m, err := x.tryRead(20 * time.Second)
				if err != nil {
					errs <- fmt.Errorf("%s after %d envelopes: %v", x.id, got, err)
					return
				}
				switch {
				case m.Kind == mcpx.KindMCP:
					got++
					if x == a {
						<-window
					}
				case m.Kind == mcpx.KindPresence && m.event() == mcpx.PresenceLeave:
					left = m
				}
			}
			leaves <- left
		}()
	}
	var left *msg
	for range 2 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case left = <-leaves:
		}
	}
	<-done
	if left.presenceID() != "sloth" || left.field("reason") != string(mcpx.LeaveSlowConsumer) {
		t.Fatalf("leave %s, want sloth dropped as a slow consumer", left)
	}
}
