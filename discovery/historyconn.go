package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTimedCalls bounds the tools/call requests a HistoryConn times at
// once: a request never answered (cancelled, or the connection lost) must
// not be remembered forever.
const maxTimedCalls = 1000

// HistoryConn is a connection to the server Server that records in History
// the outcome of each tools/call written to it, when its answer is read:
// for a relay of messages (cvm proxy) that has no call of its own to time.
// History is saved after each answer.
type HistoryConn struct {
	mcp.Connection
	Server  nostr.PubKey
	History *History
	Logger  *slog.Logger

	mu      sync.Mutex
	started map[any]time.Time // by the request's JSON-RPC id
}

// Write times tools/call requests, then writes.
func (c *HistoryConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "tools/call" {
		c.mu.Lock()
		if c.started == nil {
			c.started = make(map[any]time.Time)
		}
		if len(c.started) < maxTimedCalls {
			c.started[req.ID.Raw()] = time.Now()
		}
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

// Read reads, and records the outcome of a timed call it answers.
func (c *HistoryConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return msg, err
	}
	c.mu.Lock()
	start, timed := c.started[resp.ID.Raw()]
	delete(c.started, resp.ID.Raw())
	c.mu.Unlock()
	if timed {
		c.History.Record(c.Server, time.Since(start), resp.Error, time.Now())
		if serr := c.History.Save(); serr != nil && c.Logger != nil {
			c.Logger.Warn("could not save the call history", "path", c.History.Path(), "err", serr)
		}
	}
	return msg, nil
}
