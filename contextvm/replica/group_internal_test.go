package replica

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
)

// The in-flight record of an answered call is removed off the answering
// goroutine, by the remover; when its queue is full, at once; and what is
// queued when the replica closes is removed then.
func TestGroupRemovesAnsweredRecordsOffTheAnsweringPath(t *testing.T) {
	ns := natstest.Start(t)
	conn, err := natsx.Connect(t.Context(), ns.URL(), natsx.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	g := New(Options{Conn: conn, Member: "m"})
	if err := g.join(ctx, nostr.Generate().Public(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	g.forget = make(chan nostr.ID, 3)
	client := nostr.Generate().Public()
	records := func() int {
		t.Helper()
		keys, err := g.store.Keys(ctx, g.inflightSpace("m"))
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	ids := make([]nostr.ID, 4)
	for i := range ids {
		ids[i] = nostr.ID{byte(i + 1)}
		if err := g.begin(ctx, ids[i], client, inflightRecord{ID: json.RawMessage("1")}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[:3] {
		g.end(ctx, id)
	}
	if n := records(); n != 4 {
		t.Fatalf("%d records right after three answers; want 4: the removals are queued", n)
	}
	g.end(ctx, ids[3]) // the queue is full: removed now
	if n := records(); n != 3 {
		t.Fatalf("%d records after an answer with the queue full; want 3", n)
	}
	rctx, cancel := context.WithCancel(ctx)
	cancel() // a replica that closes removes what is queued
	done := make(chan struct{})
	go func() { g.remover(rctx); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the remover did not return")
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records left after the remover drained its queue", n)
	}
}

// testGroup is a group of member "a" on an embedded NATS that also knows
// a live member "b", and has been ready for a while.
func testGroup(t *testing.T) *Group {
	t.Helper()
	ns := natstest.Start(t)
	conn, err := natsx.Connect(t.Context(), ns.URL(), natsx.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	g := New(Options{Conn: conn, Member: "a"})
	if err := g.join(t.Context(), nostr.Generate().Public(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	g.heard(heartbeat{Member: "b"})
	g.settled()
	return g
}

// settled makes the link look up for long enough to coordinate.
func (g *Group) settled() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.upSince = time.Now().Add(-settleBeats * g.beat)
}

// clientOf returns a client that the rendezvous gives to member.
func clientOf(live []string, member string) nostr.PubKey {
	for {
		if c := nostr.Generate().Public(); rendezvous(live, c) == member {
			return c
		}
	}
}

// A replica cut off from NATS may be taken for dead meanwhile, and its
// clients taken over: when its link comes back, it reads their owners
// again instead of trusting what it cached, and leaves them where their
// session records say.
func TestGroupReadsOwnersAgainWhenItsLinkComesBack(t *testing.T) {
	g := testGroup(t)
	ctx := t.Context()
	client := clientOf([]string{"a", "b"}, "a")
	if p, _ := g.place(ctx, client); p != placeMine {
		t.Fatalf("placement %v; want this replica's", p)
	}
	// While a was cut off, b took the client over.
	b, _ := json.Marshal(sessionRecord{Owner: "b"})
	if err := g.store.Put(ctx, sessionSpace, client[:], b, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	g.linkChanged(false)
	g.linkChanged(true)
	g.settled()
	if p, owner := g.place(ctx, client); p != placeOther || owner != "b" {
		t.Fatalf("placement %v (%s) after the link came back; want b's, as its record says", p, owner)
	}
}

// Held requests come out in the order they came, and while any is held a
// request of this replica is held after them, even once it can coordinate
// again: a client's requests run in the order it sent them.
func TestGroupHoldsRequestsInOrder(t *testing.T) {
	g := testGroup(t)
	ctx := t.Context()
	client := clientOf([]string{"a", "b"}, "a")
	g.linkChanged(false)
	first, second := &msg{}, &msg{}
	g.hold(first)
	if out := g.release(); out != nil {
		t.Fatalf("released %d requests while cut off", len(out))
	}
	g.linkChanged(true)
	g.settled()
	if p, _ := g.place(ctx, client); p != placeDown {
		t.Fatalf("placement %v with a request held; want it held too", p)
	}
	g.hold(second)
	if out := g.release(); len(out) != 2 || out[0] != first || out[1] != second {
		t.Fatalf("released %v; want the two held, in order", out)
	}
	if p, _ := g.place(ctx, client); p != placeMine {
		t.Fatalf("placement %v with nothing held; want this replica's", p)
	}
}

// The in-flight record of a message event holds the ids of its calls: one
// for a single call, all of a batch's (not its notifications), none for
// notifications and responses.
func TestCallIDs(t *testing.T) {
	for _, c := range []struct {
		content string
		want    string // the record as JSON, "" for none
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, `{"client":"","id":7,"wrap":0}`},
		{`{"jsonrpc":"2.0","id":"x","method":"ping"}`, `{"client":"","id":"x","wrap":0}`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"b","method":"b"}]`, `{"client":"","ids":[1,"b"],"wrap":0}`},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"}]`, `{"client":"","ids":[1],"wrap":0}`},
		{`[{"jsonrpc":"2.0","method":"n"}]`, ""},
		{`not json`, ""},
	} {
		rec, ok := callIDs(c.content)
		got := ""
		if ok {
			b, _ := json.Marshal(rec)
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%s: record %s; want %s", c.content, got, c.want)
		}
	}
}
