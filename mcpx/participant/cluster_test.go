package participant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/roomnats"
	"github.com/cvmgo/cvm/mcpx/roomtest"
)

// startClusterNodes starts n gateway nodes sharing one embedded JetStream
// server and one set of keys (cvm room serve --nats, in process).
func startClusterNodes(t *testing.T, n int) []*testGateway {
	t.Helper()
	ns := natstest.Start(t)
	keys := roomtest.NewKeys(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*testGateway
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
		conn, err := natsx.Connect(ctx, ns.URL(), natsx.Options{Logger: log, ReconnectWait: 50 * time.Millisecond})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		cl, err := roomnats.NewCluster(ctx, conn, roomnats.ClusterOptions{NodeTimeout: 2 * time.Second, Logger: log})
		cancel()
		if err != nil {
			conn.Close()
			t.Fatal(err)
		}
		// Cleanups run last-in first-out: the gateway closes first.
		t.Cleanup(func() { cl.Close(); conn.Close() })
		g := startGateway(t, room.Options{Tokens: keys, Backend: cl, History: roomtest.NoHistory})
		nodes = append(nodes, g)
	}
	return nodes
}

// A participant given three nodes of a cluster, connected to the first:
// when that node stops, it moves to the next and resumes there by seq.
// Every chat of the topic (sent before, while it was away, and after)
// reaches it exactly once, in seq order, and the seqs it saw are exactly
// the topic's history; what it sends on the new node is delivered too.
func TestClient_MovesToTheNextGatewayOfACluster(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	// A slow reconnect, so that chats are sent while alice is away and
	// reach her by the resume from history on the new node.
	alice, aev := a.client("room:x", "alice", Options{Gateways: []string{b.URL, c.URL}, ReconnectMin: time.Second, ReconnectMax: 2 * time.Second})
	bob, bev := c.client("room:x", "bob", Options{})
	aev.wait(t, "bob's join", func(e Event) bool { return e.Type == EventJoin && e.Participant.ID == "bob" })
	ctx := testCtx(t)
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := bob.Chat(ctx, fmt.Sprint("m", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 60
	chat := func(text string) func(Event) bool {
		return func(e Event) bool { return e.Type == EventChat && e.Chat.Text == text }
	}
	send(0, n/3)
	aev.wait(t, "the first chats", chat(fmt.Sprint("m", n/3-1)))

	a.Server.Close() // node A stops; alice's connection with it
	aev.wait(t, "the disconnection", func(e Event) bool { return e.Type == EventDisconnected })
	send(n/3, 2*n/3) // while alice is away, or moving
	connected := func() int {
		k := 0
		for _, e := range aev.snapshot() {
			if e.Type == EventConnected {
				k++
			}
		}
		return k
	}
	bev.wait(t, "the chats sent while alice was away", chat(fmt.Sprint("m", 2*n/3-1)))
	away := connected() == 1
	testwait.Eventually(t, patience, "alice connected again", func() bool { return connected() == 2 })
	send(2*n/3, n)
	aev.wait(t, "the last chat", chat(fmt.Sprint("m", n-1)))
	if _, err := alice.Chat(ctx, "back"); err != nil {
		t.Fatalf("alice's chat after the move: %v", err)
	}
	bev.wait(t, "alice's chat after the move", chat("back"))
	aev.wait(t, "the echo of alice's chat", chat("back"))

	// Every chat once, in order; the seqs alice saw are history's.
	var got []string
	var seqs []uint64
	for _, e := range aev.snapshot() {
		if e.Type != EventChat {
			continue
		}
		got = append(got, e.Chat.Text)
		if len(seqs) > 0 && e.Chat.Seq <= seqs[len(seqs)-1] {
			t.Fatalf("seq %d after %d: %v", e.Chat.Seq, seqs[len(seqs)-1], got)
		}
		seqs = append(seqs, e.Chat.Seq)
	}
	replayed := 0
	for _, e := range aev.snapshot() {
		if e.Type == EventChat && e.Replayed {
			replayed++
		}
	}
	if away && replayed == 0 {
		t.Fatal("chats were sent while alice was away, and none was replayed from history")
	}
	t.Logf("%d chats replayed from the new node's history", replayed)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("m", i))
	}
	want = append(want, "back")
	if !slices.Equal(got, want) {
		t.Fatalf("alice saw %v\nwant %v", got, want)
	}
	hist, more, err := alice.History(ctx, HistoryQuery{Limit: 1000})
	if err != nil || more {
		t.Fatalf("history: %v (more %v)", err, more)
	}
	var hseqs []uint64
	for _, e := range hist {
		hseqs = append(hseqs, e.Seq)
	}
	slices.Sort(hseqs)
	if !slices.Equal(seqs, hseqs) {
		t.Fatalf("alice saw seqs %v, history holds %v", seqs, hseqs)
	}
	// Bob, on another node, saw alice leave node A and join again.
	bev.wait(t, "alice's rejoin", func(e Event) bool {
		return e.Type == EventJoin && e.Participant.ID == "alice" && !e.Replayed
	})
}

// Connect tries the gateways in order: a node that cannot be reached is
// skipped, a refusal (a bad token) is the cluster's answer and returned.
func TestClient_ConnectSkipsAnUnreachableGateway(t *testing.T) {
	nodes := startClusterNodes(t, 2)
	dead := roomtest.Start(t, room.Options{})
	dead.Server.Close()
	opts := Options{Gateway: dead.URL, Gateways: []string{nodes[1].URL}, Topic: "room:x", ReconnectMin: 20 * time.Millisecond}
	opts.Token = nodes[0].token("room:x", "alice")
	c, err := Connect(testCtx(t), opts)
	if err != nil {
		t.Fatalf("connect past a dead gateway: %v", err)
	}
	defer c.Close()
	if _, err := c.Chat(testCtx(t), "hi"); err != nil {
		t.Fatal(err)
	}
	opts.Token = "not-a-token"
	_, err = Connect(testCtx(t), opts)
	var herr *HTTPError
	if !errors.As(err, &herr) || herr.Status != 401 {
		t.Fatalf("a bad token: %v, want HTTP 401", err)
	}
}
