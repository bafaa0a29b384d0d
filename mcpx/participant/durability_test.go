package participant

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
)

// stallHistory holds back the commits of the records appended while it is
// stalled; crash then forgets them, as a gateway killed before their
// commit does.
type stallHistory struct {
	*history.Store
	mu      sync.Mutex
	stalled bool
	held    int
}

func newStallHistory(t *testing.T) *stallHistory {
	st, err := history.Open(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &stallHistory{Store: st}
}

func (s *stallHistory) Append(topic string, r history.Record, committed func(error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled {
		s.held++
		return nil // never committed, never reported
	}
	return s.Store.Append(topic, r, committed)
}

func (s *stallHistory) stall() {
	s.mu.Lock()
	s.stalled = true
	s.mu.Unlock()
}

func (s *stallHistory) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ; s.held > 0; s.held-- {
		s.Store.Release() // the places of the records lost
	}
	s.stalled = false
}

// A gateway answers a ping as soon as it has read the frames before it,
// not once they are committed: an envelope it delivered and answered pings
// after, but lost in a crash before its commit, is sent again after the
// reconnect, because the client confirms only what history holds.
func TestClient_APongDoesNotConfirmAnEnvelopeHistoryLost(t *testing.T) {
	st := newStallHistory(t)
	g := startGateway(t, room.Options{History: st})
	proxy := newProxy(t, g.Addr.String())
	alice, err := Connect(testCtx(t), Options{
		Gateway: proxy.url(), Topic: "room:x", Token: g.token("room:x", "alice"),
		PingInterval: 10 * time.Millisecond, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	_, bev := g.client("room:x", "bob", Options{})
	ctx := testCtx(t)

	st.stall()
	sent, err := alice.Notify(ctx, []string{"bob"}, methodChat, map[string]string{"text": "held"})
	if err != nil {
		t.Fatal(err)
	}
	live := bev.wait(t, "the chat, live before its commit", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "held" })
	// Three pings after bob had it: the second one's round began after
	// the first had ended, so after the write, and the third shows that
	// alice's pinger has acted on the second's pong.
	proxy.waitPings(t, 3)
	st.crash()
	g.restart()

	again := bev.wait(t, "the chat sent again", func(e Event) bool {
		return e.Type == EventChat && e.Chat.Text == "held" && e.Chat.Seq > live.Chat.Seq
	})
	if again.Chat.ID != sent.ID {
		t.Fatalf("sent again as %s, want the same envelope %s", again.Chat.ID, sent.ID)
	}
	if _, _, err := alice.History(ctx, HistoryQuery{After: sent.ID, Limit: 1}); err != nil {
		t.Fatalf("the envelope is not in history after the resend: %v", err)
	}
}

// With directed envelopes and no echo, the pinger confirms the outbox by
// finding the last envelope written in history: the outbox does not grow
// while the connection is fine.
func TestClient_PingerConfirmsWhatHistoryHolds(t *testing.T) {
	g := startGateway(t, room.Options{})
	proxy := newProxy(t, g.Addr.String())
	alice, err := Connect(testCtx(t), Options{
		Gateway: proxy.url(), Topic: "room:x", Token: g.token("room:x", "alice"),
		PingInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	_, bev := g.client("room:x", "bob", Options{})
	ctx := testCtx(t)
	for i := range 5 {
		if _, err := alice.Notify(ctx, []string{"bob"}, methodChat, map[string]string{"text": fmt.Sprint("m", i)}); err != nil {
			t.Fatal(err)
		}
	}
	bev.wait(t, "the last chat", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "m4" })
	proxy.waitPings(t, 3)
	if left := outboxEntries(alice, nil); left != 0 {
		t.Fatalf("%d envelopes still unconfirmed after a round of the pinger that began after they were written", left)
	}
}

// A participant that joined an empty topic and was away while more than a
// page was published reads all of it when it comes back: resuming from
// seq 0 starts at the oldest page, not the newest.
func TestClient_ResumeFromTheVeryBeginningReadsEveryPage(t *testing.T) {
	g := startGateway(t, room.Options{HistoryPageLimit: 3})
	proxy := newProxy(t, g.Addr.String())
	bev := newEvents()
	bob, err := Connect(testCtx(t), Options{
		Gateway: proxy.url(), Topic: "room:x", Token: g.token("room:x", "bob"),
		PingInterval: -1, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
		OnEvent: bev.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	alice, aev := g.client("room:x", "alice", Options{})
	bev.wait(t, "alice's join", func(e Event) bool { return e.Type == EventJoin })

	proxy.refuse.Store(true)
	proxy.cut()
	bev.wait(t, "disconnected", func(e Event) bool { return e.Type == EventDisconnected })
	ctx := testCtx(t)
	const n = 7
	for i := range n {
		if _, err := alice.Chat(ctx, fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	aev.wait(t, "the last echo", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == fmt.Sprint("m", n-1) })
	proxy.refuse.Store(false)

	bev.wait(t, "the last chat", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == fmt.Sprint("m", n-1) })
	var got, want []string
	for _, e := range bev.snapshot() {
		if e.Type == EventChat {
			got = append(got, e.Chat.Text)
		}
	}
	for i := range n {
		want = append(want, fmt.Sprint("m", i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bob read %v, want %v", got, want)
	}
}
