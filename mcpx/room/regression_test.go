package room_test

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
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

func TestReferenceBug_DuplicateIDReplacesOldConnectionWithoutGhost(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{RatePerSecond: 0.001, RateBurst: 3})
	old, _ := g.Join("room:x", "alice")
	bob, _ := g.Join("room:x", "bob")
	old.Read() // bob's join
	old.Chat("1")
	old.Chat("2")
	old.Read()
	old.Read()
	bob.Read()
	bob.Read()

	fresh, w := g.Join("room:x", "alice")
	if !strings.Contains(string(w.Payload), `"participants":[{"id":"bob"`) {
		t.Fatalf("new connection's welcome %s", w)
	}
	// The old socket is closed with the reference's status and reason.
	_, err := old.TryRead(5 * time.Second)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "Duplicate connection - disconnecting old session" {
		t.Fatalf("old connection: %v", err)
	}
	// Others see the old session leave, then the new one join: a roster
	// built from presence ends with alice present (the reference sends join
	// then leave, and alice vanishes).
	leave, join := bob.Read(), bob.Read()
	if leave.Event() != mcpx.PresenceLeave || leave.PresenceID() != "alice" || leave.Field("reason") != string(mcpx.LeaveReplaced) ||
		join.Event() != mcpx.PresenceJoin || join.PresenceID() != "alice" {
		t.Fatalf("bob saw\n%s\n%s\nwant alice's leave (replaced) then join", leave, join)
	}
	var parts struct{ Participants []mcpx.Participant }
	g.Get("/v0/topics/room:x/participants", g.Token("room:x", "bob"), &parts)
	if len(parts.Participants) != 2 || parts.Participants[0].ID != "alice" || parts.Participants[1].ID != "bob" {
		t.Fatalf("roster %+v, want alice and bob", parts.Participants)
	}
	// The new connection gets directed messages...
	dm := bob.Env([]string{"alice"}, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
	bob.Send(dm)
	if m := fresh.Read(); m.ID != dm["id"] {
		t.Fatalf("new alice got %s", m)
	}
	// ...and shares the old one's rate limit: one token left of three.
	fresh.Chat("3")
	fresh.Read()
	bob.Read()
	over := fresh.Chat("4")
	fresh.ExpectError(mcpx.CodeRateLimited, over["id"].(string))
}

func TestReferenceBug_SpoofedPresenceAndSystemAreNeverRelayed(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	mallory, _ := g.Join("room:x", "mallory")
	bob, _ := g.Join("room:x", "bob")
	carol, _ := g.Join("room:x", "carol")
	mallory.Read()
	mallory.Read()
	bob.Read()
	mallory.SendRaw(`{"protocol":"mcp-x/v0","id":"fake-leave","ts":"2025-08-17T14:00:00Z","from":"mallory","kind":"presence","payload":{"event":"leave","participant":{"id":"bob"}}}`)
	mallory.ExpectError(mcpx.CodeReservedKind, "fake-leave")
	mallory.SendRaw(`{"protocol":"mcp-x/v0","id":"fake-welcome","ts":"2025-08-17T14:00:00Z","from":"mallory","kind":"system","payload":{"type":"welcome","participant_id":"x"}}`)
	mallory.ExpectError(mcpx.CodeReservedKind, "fake-welcome")
	gatewaytest.Barrier(t, mallory, bob, carol)
	if h, _ := g.HistoryPage("room:x", "bob", ""); len(h) != 1 {
		t.Fatalf("history holds %v, want only the barrier", gatewaytest.IDs(h))
	}
}

func TestReferenceBug_BeforeTheOldestIDIsAnEmptyPage(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	a, _ := g.Join("room:x", "alice")
	first := a.Chat("oldest")
	a.Read()
	a.Chat("newer")
	a.Read()
	if h, more := g.HistoryPage("room:x", "alice", "?before="+first["id"].(string)); len(h) != 0 || more {
		t.Fatalf("before=<oldest id> returned %v; the reference returns the newest page here", gatewaytest.IDs(h))
	}
	var e room.ErrorBody
	if code, _ := g.Get("/v0/topics/room:x/history?before=no-such-id", g.Token("room:x", "alice"), &e); code != 400 || e.Code != mcpx.CodeUnknownCursor {
		t.Fatalf("unknown cursor: %d %+v; the reference silently ignores it", code, e)
	}
}

func TestReferenceBug_NoSilentDrops(t *testing.T) {
	// notes §3.9: 12 chats in a burst, 9 delivered, 3 gone without a word.
	g := gatewaytest.Start(t, room.Options{RatePerSecond: 0.001, RateBurst: 9})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	a.Read()
	var sent []string
	for i := 0; i < 12; i++ {
		sent = append(sent, a.Chat(fmt.Sprint("burst-", i))["id"].(string))
	}
	delivered, refused := 0, 0
	for i := 0; i < 12; i++ {
		m := a.Read()
		switch {
		case m.Kind == mcpx.KindMCP && m.ID == sent[i]:
			delivered++
		case m.Kind == mcpx.KindSystem && m.Event() == "error" && m.CorrelationID == sent[i]:
			refused++
		default:
			t.Fatalf("frame %d: %s", i, m)
		}
	}
	if delivered != 9 || refused != 3 {
		t.Fatalf("delivered %d refused %d: every frame must be delivered or answered", delivered, refused)
	}
	for i := 0; i < 9; i++ {
		b.Read()
	}
	// notes §3.6: a from mismatch is dropped with only a server log.
	g2 := gatewaytest.Start(t, room.Options{})
	x, _ := g2.Join("room:x", "alice")
	x.SendRaw(`{"protocol":"mcp-x/v0","id":"spoof","ts":"2025-08-17T14:00:00Z","from":"bob","kind":"mcp","payload":{"jsonrpc":"2.0","method":"n"}}`)
	x.ExpectError(mcpx.CodeFromMismatch, "spoof")
}

func TestReferenceBug_ErrorsAreEnvelopesNotBareJSON(t *testing.T) {
	// notes §3.7: the reference answers {"error":"Invalid message format",...},
	// which its own client drops as "Invalid protocol version: undefined".
	g := gatewaytest.Start(t, room.Options{})
	a, _ := g.Join("room:x", "alice")
	for _, frame := range []string{`{'`, `{"protocol":"mcp-x/v1"}`, `{"protocol":"mcp-x/v0","id":"p","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":[]}`} {
		a.SendRaw(frame)
		m := a.Read()
		if m.Protocol != mcpx.Protocol || m.ID == "" || m.TS == "" || m.Kind != mcpx.KindSystem || m.From != mcpx.GatewayID || m.Event() != "error" {
			t.Fatalf("reply to %s is not an error envelope: %s", frame, m)
		}
		if strings.Contains(string(m.Raw), `"details"`) {
			t.Fatalf("reference-style details field: %s", m)
		}
	}
}

func TestReferenceBug_HistoryOutlivesAnEmptyTopic(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{})
	a, _ := g.Join("room:x", "alice")
	sent := a.Chat("still here later")
	a.Read()
	a.Conn.Close(websocket.StatusNormalClosure, "")
	testwait.Eventually(t, 10*time.Second, "the topic to empty", func() bool { return room.TopicSize(g.Server.Gateway, "room:x") == 0 })
	if h, _ := g.HistoryPage("room:x", "bob", ""); len(h) != 1 || h[0].ID != sent["id"] {
		t.Fatalf("history of an empty topic: %v", gatewaytest.IDs(h))
	}
}

func TestReferenceBug_SlowConsumerIsDroppedAndNeverStallsTheTopic(t *testing.T) {
	// The reference has no send-queue bound: one participant that stops
	// reading grows the gateway's memory without limit.
	g := gatewaytest.Start(t, room.Options{SendQueueBytes: 1 << 20, SendQueueFrames: 1 << 20})
	a, _ := g.Join("room:x", "alice")
	c, _ := g.Join("room:x", "carol")
	g.DialSlow("room:x", "sloth") // never reads
	a.Read()
	a.Read()
	c.Read()
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
			b, _ := json.Marshal(a.Env(nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"i":`+fmt.Sprint(i)+`,"pad":"`+pad+`"}}`))
			if err := a.Conn.Write(context.Background(), websocket.MessageText, b); err != nil {
				errs <- fmt.Errorf("alice: write %d: %v", i, err)
				return
			}
		}
	}()
	// Both fast readers read concurrently: either one pausing would make it
	// a slow consumer too.
	leaves := make(chan *gatewaytest.Msg, 2)
	for _, x := range []*gatewaytest.Client{a, c} {
		go func() {
			got := 0
			var left *gatewaytest.Msg
			for got < n || left == nil {
				m, err := x.TryRead(20 * time.Second)
				if err != nil {
					errs <- fmt.Errorf("%s after %d envelopes: %v", x.ID, got, err)
					return
				}
				switch {
				case m.Kind == mcpx.KindMCP:
					got++
					if x == a {
						<-window
					}
				case m.Kind == mcpx.KindPresence && m.Event() == mcpx.PresenceLeave:
					left = m
				}
			}
			leaves <- left
		}()
	}
	var left *gatewaytest.Msg
	for range 2 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case left = <-leaves:
		}
	}
	<-done
	if left.PresenceID() != "sloth" || left.Field("reason") != string(mcpx.LeaveSlowConsumer) {
		t.Fatalf("leave %s, want sloth dropped as a slow consumer", left)
	}
}
