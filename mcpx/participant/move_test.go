package participant

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call in flight to a peer while the peer moves to another node of the
// cluster (its node stops; its new connection replaces the old one) is
// answered by the peer once it is back: the leave of the replaced
// connection does not fail it.
func TestClient_CallInFlightSurvivesThePeersMove(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	type in struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "gate"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	_, aev := nodes[0].client("room:x", "alpha", Options{Server: SDKServer(srv), Gateways: []string{nodes[1].URL}})
	bob, bev := nodes[2].client("room:x", "bob", Options{})
	bev.wait(t, "alpha in bob's roster", func(e Event) bool {
		return e.Type == EventJoin && e.Participant.ID == "alpha" || e.Type == EventConnected && len(e.Participants) == 1
	})

	type result struct {
		res []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
		defer cancel()
		res, err := bob.Request(ctx, "alpha", "tools/call", map[string]any{"name": "gate", "arguments": map[string]any{}})
		done <- result{res, err}
	}()
	select {
	case <-started:
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("the call never reached alpha's handler")
	}
	nodes[0].Server.Close() // alpha's node stops while the call is in flight
	aev.wait(t, "alpha's disconnection", func(e Event) bool { return e.Type == EventDisconnected })
	testwait.Eventually(t, patience, "alpha connected to the next node", func() bool {
		k := 0
		for _, e := range aev.snapshot() {
			if e.Type == EventConnected {
				k++
			}
		}
		return k == 2
	})
	// The others see the old connection replaced by the new one, and no
	// other leave: the stopping node does not report its participants
	// left, since they are moving, not leaving.
	bev.wait(t, "alpha's old connection replaced", func(e Event) bool {
		return e.Type == EventLeave && e.Participant.ID == "alpha" && e.Reason == mcpx.LeaveReplaced
	})
	bev.wait(t, "alpha's new join", func(e Event) bool { return e.Type == EventJoin && e.Participant.ID == "alpha" })
	for _, e := range bev.snapshot() {
		if e.Type == EventLeave && e.Reason != mcpx.LeaveReplaced {
			t.Fatalf("bob saw %s leave (%s): a stopping node's participants are moving, not leaving", e.Participant.ID, e.Reason)
		}
	}
	close(release)
	select {
	case r := <-done:
		if r.err != nil || !strings.Contains(string(r.res), "done") {
			for _, e := range bev.snapshot() {
				t.Logf("bob: %v %s %s", e.Type, e.Participant.ID, e.Reason)
			}
			t.Fatalf("call across the move: %s %v", r.res, r.err)
		}
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("the call was never answered")
	}
}
