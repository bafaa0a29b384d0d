package contextvm

import (
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Progress on the token "1" is not progress on the request whose token is
// the number 1: it must not keep that request alive.
func TestKeepAlive_ComparesTokensAsJSONValues(t *testing.T) {
	progress := func(tok string) *jsonrpc.Request {
		return &jsonrpc.Request{Method: mcpmsg.MethodProgress, Params: json.RawMessage(`{"progressToken":` + tok + `,"progress":1}`)}
	}
	for _, tc := range []struct {
		name      string
		progress  string // the token progress arrives on
		keptAlive bool
	}{
		{"same number", `1`, true},
		{"same number written differently", `1.0`, true},
		{"the string of the number", `"1"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newTestClientConn(t, ClientOptions{RequestTimeout: time.Second})
				p := c.track(&jsonrpc.Request{ID: mcpmsg.IntID(7), Method: "tools/call", Params: json.RawMessage(`{"name":"x","_meta":{"progressToken":1}}`)})
				time.Sleep(900 * time.Millisecond)
				c.dispatch(nostr.Event{}, 0, []jsonrpc.Message{progress(tc.progress)})
				if msg := <-c.incoming; msg.(*jsonrpc.Request).Method != mcpmsg.MethodProgress {
					t.Fatalf("the go-sdk got %v, want the progress notification", msg)
				}
				time.Sleep(200 * time.Millisecond) // past the first deadline, before the second
				var timedOut bool
				select {
				case msg := <-c.incoming:
					var werr *jsonrpc.Error
					timedOut = errors.As(msg.(*jsonrpc.Response).Error, &werr) && werr.Code == CodeRequestTimeout
				default:
				}
				p.stopTimers()
				if timedOut == tc.keptAlive {
					t.Fatalf("progress on %s: timed out = %v, want %v", tc.progress, timedOut, !tc.keptAlive)
				}
			})
		})
	}
}

// newTestClientConn is a client connection without relays: what it would
// publish goes nowhere, what the go-sdk would read waits in c.incoming.
func newTestClientConn(t *testing.T, opts ClientOptions) *clientConn {
	t.Helper()
	c := &clientConn{
		opts:     opts,
		endpoint: endpoint{log: slog.New(slog.DiscardHandler)},
		incoming: make(chan jsonrpc.Message, 16),
		closed:   make(chan struct{}),
		pending:  make(map[nostr.ID]*pendingRequest),
		byRPCID:  make(map[jsonrpc.ID]*pendingRequest),
		inbound:  make(map[jsonrpc.ID]nostr.ID),
		accepts:  make(map[mcpmsg.Token]chan struct{}),
		injected: make(map[mcpmsg.Token]bool),
		streams:  make(map[mcpmsg.Token]*StreamReader),
	}
	return c
}

// track registers m as a request sent, as writeRequest does before
// publishing it.
func (c *clientConn) track(m *jsonrpc.Request) *pendingRequest {
	p := &pendingRequest{req: m, wire: m}
	p.token, _ = mcpmsg.ProgressToken(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byRPCID[m.ID] = p
	p.timer = time.AfterFunc(c.opts.RequestTimeout, func() { c.expire(p) })
	return p
}
