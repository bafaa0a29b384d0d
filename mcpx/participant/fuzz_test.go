package participant

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzClientFrame feeds the client's receive path (everything a gateway or
// a peer can make it read) with arbitrary frames: it must never panic.
func FuzzClientFrame(f *testing.F) {
	for _, seed := range []string{
		`{"protocol":"mcp-x/v0","id":"w","ts":"2025-08-17T14:00:00Z","from":"system:gateway","kind":"system","payload":{"event":"welcome","participant":{"id":"me"},"participants":[{"id":"p"}],"history":{"enabled":true,"limit":10,"latest_seq":3}}}`,
		`{"protocol":"mcp-x/v0","id":"j","ts":"2025-08-17T14:00:00Z","from":"system:gateway","kind":"presence","payload":{"event":"join","participant":{"id":"p"}}}`,
		`{"protocol":"mcp-x/v0","id":"l","ts":"2025-08-17T14:00:00Z","from":"system:gateway","kind":"presence","payload":{"event":"leave","participant":{"id":"p"},"reason":"timeout"}}`,
		`{"protocol":"mcp-x/v0","id":"e","ts":"2025-08-17T14:00:00Z","from":"system:gateway","to":["me"],"kind":"system","correlation_id":"x","payload":{"event":"error","code":"rate_limited","message":"m","retry_after_ms":5}}`,
		`{"protocol":"mcp-x/v0","id":"c","ts":"2025-08-17T14:00:00Z","from":"p","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"hi"}},"seq":7}`,
		`{"protocol":"mcp-x/v0","id":"r","ts":"2025-08-17T14:00:00Z","from":"p","to":["me"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`,
		`{"protocol":"mcp-x/v0","id":"s","ts":"2025-08-17T14:00:00Z","from":"p","to":["me"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":"a","method":"sampling/createMessage","params":{}}}`,
		`{"protocol":"mcp-x/v0","id":"q","ts":"2025-08-17T14:00:00Z","from":"p","to":["me"],"kind":"mcp","correlation_id":"r","payload":{"jsonrpc":"2.0","id":1,"result":{}}}`,
		`{"protocol":"mcp-x/v0","id":"n","ts":"2025-08-17T14:00:00Z","from":"p","to":["me"],"kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcpx-1","progress":1}}}`,
		`{"protocol":"mcp-x/v0","id":"k","ts":"2025-08-17T14:00:00Z","from":"p","to":["me"],"kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}}`,
		`{"protocol":"mcp-x/v0","id":"d","ts":"2025-08-17T14:00:00Z","from":"p","to":["me"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":2,"method":"shutdown"}}`,
		`{"protocol":"mcp-x/v0","id":"m","ts":"2025-08-17T14:00:00Z","from":"me","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"# hi","format":"markdown"}},"seq":8}`,
		`not json`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := fuzzClient()
		defer c.Close()
		c.handleFrame(data, false)
		c.handleFrame(data, true)
		var cs connState
		if e, err := mcpx.DecodeDelivered(data); err == nil {
			parseWelcome(e.Payload, &cs)
		}
	})
}

// fuzzClient is a Client with no connection: what it would send waits for
// one and gives up when the client closes.
func fuzzClient() *Client {
	opts := Options{Gateway: "http://127.0.0.1:1", Topic: "room:x", Token: "t",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RequestTimeout: -1}
	opts.defaults()
	opts.Server = SDKServer(mcp.NewServer(&mcp.Implementation{Name: "me"}, nil))
	c := &Client{opts: opts, log: opts.Logger, ready: make(chan struct{}), roster: map[string]mcpx.Participant{},
		out: newOutbox(), pending: newPendingTable(0), peers: map[string]*peerState{},
		servers: map[string]*PeerConn{}, sessions: map[string][]*clientSideConn{}, onceLog: map[string]bool{}, saidFor: map[string]string{},
		self: mcpx.Participant{ID: "me"}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}
