package participant

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// With topic-wide visibility a participant sees requests addressed to
// others; it must not answer them (seed 001 §7).
func TestClient_IgnoresRequestsNotAddressedToIt(t *testing.T) {
	g := startGateway(t, room.Options{Visibility: room.VisibilityTopic})
	var served atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "alice"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { served.Add(1) },
	})
	alice, aev := g.client("room:x", "alice", Options{Server: SDKServer(srv)})
	carol, _ := g.client("room:x", "carol", Options{})
	bob, _ := g.client("room:x", "bob", Options{})
	aev.wait(t, "bob", func(e Event) bool { return e.Type == EventJoin && e.Participant.ID == "bob" })
	if _, err := bob.Initialize(testCtx(t), "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Request(testCtx(t), "carol", "ping", nil); err != nil {
		t.Fatal(err)
	}
	// alice saw bob's handshake with carol go by; a chat after it proves
	// she has handled everything before.
	bob.Chat(testCtx(t), "barrier")
	aev.wait(t, "barrier", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "barrier" })
	alice.mu.Lock()
	sessions := len(alice.servers)
	alice.mu.Unlock()
	if sessions != 0 || served.Load() != 0 {
		t.Fatalf("alice opened %d server sessions (%d initialized) for requests addressed to carol", sessions, served.Load())
	}
	_ = carol
}

// A client understands the reference gateway's welcome too.
func TestClient_ReferenceCompatWelcome(t *testing.T) {
	g := startGateway(t, room.Options{Compat: room.CompatReference})
	g.client("room:x", "alice", Options{})
	bob, bev := g.client("room:x", "bob", Options{})
	if bob.Self().ID != "bob" {
		t.Fatalf("self %v", bob.Self())
	}
	c := bev.wait(t, "connected", func(e Event) bool { return e.Type == EventConnected })
	if len(c.Participants) != 1 || c.Participants[0].ID != "alice" {
		t.Fatalf("roster %v", c.Participants)
	}
	for _, e := range bev.snapshot() {
		if e.Type == EventJoin && e.Participant.ID == "bob" {
			t.Fatal("bob was told of his own join")
		}
	}
}

// A peer that leaves fails the requests waiting on it at once.
func TestClient_PeerLeavingFailsItsRequests(t *testing.T) {
	g := startGateway(t, room.Options{})
	cancelled := make(chan string, 1)
	server, _ := g.client("room:x", "server", Options{Server: SDKServer(echoServer(t, cancelled))})
	caller, _ := g.client("room:x", "caller", Options{})
	done := make(chan error, 1)
	go func() {
		_, err := caller.Request(testCtx(t), "server", "tools/call", map[string]any{"name": "hang", "arguments": map[string]any{"text": "x"}})
		done <- err
	}()
	testwait.Eventually(t, patience, "the call in flight", func() bool {
		return caller.pending.has("tools/call")
	})
	server.Close()
	if err := <-done; err == nil || !errors.Is(err, ErrPeerLeft) {
		t.Fatalf("err %v, want ErrPeerLeft", err)
	}
}

// A go-sdk handler still running for a peer that leaves is cancelled (the
// go-sdk would otherwise keep it, and the session, forever), and so is one
// running when the serving participant closes: Close does not hang.
func TestClient_ServerHandlersEndWithTheirSession(t *testing.T) {
	g := startGateway(t, room.Options{})
	cancelled := make(chan string, 2)
	started := make(chan string, 2)
	srv := mcp.NewServer(&mcp.Implementation{Name: "hanger", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		started <- a.Text
		<-ctx.Done()
		cancelled <- a.Text
		return nil, nil, ctx.Err()
	})
	server, _ := g.client("room:x", "server", Options{Server: SDKServer(srv)})
	caller, _ := g.client("room:x", "caller", Options{})
	// running waits for the handler itself: a session closed before the
	// call reached its handler leaves no handler to cancel.
	running := func(text string) {
		go caller.Request(context.Background(), "server", "tools/call", map[string]any{"name": "hang", "arguments": map[string]any{"text": text}})
		select {
		case got := <-started:
			if got != text {
				t.Fatalf("started %q, want %q", got, text)
			}
		case <-time.After(testwait.Timeout(patience)):
			t.Fatalf("the %s handler never started", text)
		}
	}
	running("left")
	caller.Close()
	select {
	case got := <-cancelled:
		if got != "left" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("the handler of a peer that left was never cancelled")
	}
	caller2, _ := g.client("room:x", "caller", Options{})
	caller = caller2
	running("closed")
	closed := make(chan struct{})
	go func() { server.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("Close hangs on a running handler")
	}
	select {
	case got := <-cancelled:
		if got != "closed" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("the handler still running at Close was never cancelled")
	}
}
