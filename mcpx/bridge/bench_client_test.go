package bridge

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool-call round trips through a room, each beside its baseline: the same
// call without the room.

func childCommand() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MCPX_TEST_CHILD=1")
	return cmd
}

func benchCalls(b *testing.B, cs *mcp.ClientSession) {
	ctx := context.Background()
	p := &mcp.CallToolParams{Name: "stats", Arguments: map[string]any{}}
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip_Bridge: go-sdk client -> participant.Client -> gateway -> bridge
// -> stdio server, and back.
func BenchmarkRoundTrip_Bridge(b *testing.B) {
	g := startGateway(b, room.Options{})
	g.bridge("room:b", "child")
	c, _ := g.client("room:b", "caller", participant.Options{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), c.PeerTransport("child"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	benchCalls(b, cs)
}

// BenchmarkRoundTrip_StdioDirect is the baseline: the same server over
// stdio, no room.
func BenchmarkRoundTrip_StdioDirect(b *testing.B) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: childCommand()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	benchCalls(b, cs)
}
