package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newTestClientConn is a client connection to a made-up server without
// relays: what it publishes goes into pool, what the go-sdk would read
// waits in c.incoming. Its defaults are NewClientTransport's.
func newTestClientConn(t *testing.T, opts ClientOptions, pool relayPool) *clientConn {
	t.Helper()
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	if opts.OversizedThreshold == 0 {
		opts.OversizedThreshold = DefaultOversizedThreshold
	}
	c := newClientConn(opts, testEndpoint(t, pool), nostr.Generate().Public())
	close(c.announcement)
	return c
}

// track registers m as a request sent, as writeRequest does before
// publishing it.
func (c *clientConn) track(m *jsonrpc.Request) *pendingRequest {
	p := &pendingRequest{req: m, wire: m}
	p.token, _ = mcpmsg.ProgressToken(m)
	c.pending.add(p, func(p *pendingRequest) {
		p.timer = c.life.AfterFunc(c.opts.RequestTimeout, func(context.Context) { c.expire(p) })
	})
	return p
}

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
				c := newTestClientConn(t, ClientOptions{RequestTimeout: time.Second}, &fakePool{})
				defer c.Close()
				c.track(&jsonrpc.Request{ID: mcpmsg.IntID(7), Method: "tools/call", Params: json.RawMessage(`{"name":"x","_meta":{"progressToken":1}}`)})
				time.Sleep(900 * time.Millisecond) // synctest clock: just before the deadline
				c.dispatch(nostr.Event{}, 0, []jsonrpc.Message{progress(tc.progress)})
				if msg := <-c.incoming; msg.(*jsonrpc.Request).Method != mcpmsg.MethodProgress {
					t.Fatalf("the go-sdk got %v, want the progress notification", msg)
				}
				time.Sleep(200 * time.Millisecond) // past the first deadline, before the second
				synctest.Wait()
				var timedOut bool
				select {
				case msg := <-c.incoming:
					var werr *jsonrpc.Error
					timedOut = errors.As(msg.(*jsonrpc.Response).Error, &werr) && werr.Code == CodeRequestTimeout
				default:
				}
				if timedOut == tc.keptAlive {
					t.Fatalf("progress on %s: timed out = %v, want %v", tc.progress, timedOut, !tc.keptAlive)
				}
			})
		})
	}
}

// After Close, none of the connection's timers fires: not a request's
// timeout or plaintext fallback, not a reassembly's expiry (which would
// publish an abort), not a stream's probe (which would publish a ping).
func TestClientConn_NothingFiresAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &fakePool{}
		c := newTestClientConn(t, ClientOptions{
			RequestTimeout:    time.Second,
			PlaintextFallback: time.Second,
			Transfers:         TransferLimits{Timeout: time.Second},
			Streams:           StreamLimits{IdleTimeout: time.Second},
		}, pool)
		c.Write(context.Background(), &jsonrpc.Request{ID: mcpmsg.IntID(1), Method: "tools/list", Params: json.RawMessage(`{}`)})
		published := pool.count()
		start := progressFrame{ProgressToken: mcpmsg.StringToken("answer"), Progress: 1, CVM: &transferFrame{Type: oversizedType, FrameType: "start",
			Digest: digestOf("x"), TotalBytes: intPtr(1), TotalChunks: intPtr(1)}}
		if _, _, _, err := c.transfers.frame(c.server, start, nil); err != nil {
			t.Fatal(err)
		}
		r, err := c.openStream(mcpmsg.StringToken("s"))
		if err != nil {
			t.Fatal(err)
		}
		r.frame(&streamFrame{FrameType: "start"})

		c.Close()
		time.Sleep(time.Minute) // long past every deadline
		synctest.Wait()
		if n := pool.count(); n != published {
			t.Fatalf("%d events published after Close", n-published)
		}
		select {
		case msg := <-c.incoming:
			t.Fatalf("the go-sdk was handed %v after Close", msg)
		default:
		}
		if _, err := r.Next(context.Background()); !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Fatalf("reading a stream of a closed connection: %v", err)
		}
		if err := c.Write(context.Background(), &jsonrpc.Request{Method: mcpmsg.MethodInitialized}); !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Fatalf("Write after Close: %v", err)
		}
		if _, err := c.openStream(mcpmsg.StringToken("late")); !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Fatalf("a stream opened after Close: %v", err)
		}
	})
}

// A reassembly that expires while the connection is open is aborted
// towards the server and fails its request.
func TestClientConn_ExpiredTransferIsAborted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &fakePool{}
		c := newTestClientConn(t, ClientOptions{Transfers: TransferLimits{Timeout: time.Second}}, pool)
		defer c.Close()
		c.track(&jsonrpc.Request{ID: mcpmsg.IntID(3), Method: "tools/call", Params: json.RawMessage(`{"_meta":{"progressToken":"big"}}`)})
		start := progressFrame{ProgressToken: mcpmsg.StringToken("big"), Progress: 1, CVM: &transferFrame{Type: oversizedType, FrameType: "start",
			Digest: digestOf("x"), TotalBytes: intPtr(1), TotalChunks: intPtr(1)}}
		c.transfers.frame(c.server, start, nil)
		time.Sleep(2 * time.Second) // synctest clock: past the transfer's deadline
		synctest.Wait()
		if pool.count() != 1 {
			t.Fatalf("%d events published, want the abort frame", pool.count())
		}
		msg := <-c.incoming
		if resp, ok := msg.(*jsonrpc.Response); !ok || resp.Error == nil || resp.ID != mcpmsg.IntID(3) {
			t.Fatalf("the request got %v, want an error", msg)
		}
	})
}

func TestServerView(t *testing.T) {
	var v serverView
	if !v.takeDiscovery() || v.takeDiscovery() {
		t.Fatal("discovery tags go on the first message of a session only")
	}
	if k := v.wrapKind(EncryptOptional, WrapOptional); k != KindGiftWrap {
		t.Fatalf("optional, nothing learned: wrap %d", k)
	}
	v.learn(nostr.Tags{{TagSupportEncryption}, {TagSupportEncryptionEphemeral}, {TagSupportOversizedTransfer}})
	if k := v.wrapKind(EncryptOptional, WrapOptional); k != KindEphemeralGiftWrap || !v.oversized() {
		t.Fatalf("after learning ephemeral and CEP-22: wrap %d, oversized %v", k, v.oversized())
	}
	v.learn(nostr.Tags{{"p", "x"}}) // no discovery tags: nothing learned
	if !v.oversized() {
		t.Fatal("a message without discovery tags changed what was known")
	}
	v.learn(nostr.Tags{{TagName, "n"}}) // discovery tags replace, not merge
	if v.oversized() || v.wrapKind(EncryptOptional, WrapOptional) != 0 {
		t.Fatal("capabilities were merged, or a server without encryption is still sent wraps")
	}
	v.newSession()
	if !v.takeDiscovery() {
		t.Fatal("a new session sends its discovery tags again")
	}
	if v.wrapKind(EncryptOptional, WrapOptional) != 0 {
		t.Fatal("plaintext, once learned, is kept across sessions")
	}
	if v.wrapKind(EncryptRequired, WrapPersistent) != KindGiftWrap || v.wrapKind(EncryptDisabled, WrapOptional) != 0 {
		t.Fatal("required and disabled modes")
	}
}

// Every replica of a group receives every request, so a replica's error
// answer with retry_after_ms (-32018) may be followed by another replica's
// answer to the same request event. The client waits retry_after_ms (at
// most maxReplicaErrorWait, and not past the request timeout) for it; any
// other answer in that window, a result or the call's own error, wins.
func TestClientConn_ReplicaErrorWaitsForAnotherAnswer(t *testing.T) {
	type answer struct {
		at  time.Duration // after the first answer
		err *jsonrpc.Error
	}
	unavailable := func(d time.Duration) *jsonrpc.Error { return ReplicaUnavailableError(d) }
	lost := &jsonrpc.Error{Code: CodeReplicaLost, Message: "lost"}
	invalid := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad arguments"}
	for _, tc := range []struct {
		name    string
		timeout time.Duration // the request timeout (default 60 s)
		answers []answer      // a nil err is a result
		want    int64         // the code the go-sdk gets; 0 for the result
		wantAt  time.Duration // and when, after the first answer
	}{
		{"a result within the wait wins", 0, []answer{{0, unavailable(3 * time.Second)}, {2 * time.Second, nil}}, 0, 2 * time.Second},
		{"the call's own error within the wait wins", 0, []answer{{0, unavailable(3 * time.Second)}, {time.Second, invalid}}, jsonrpc.CodeInvalidParams, time.Second},
		{"no other answer: the error once the wait is over", 0, []answer{{0, unavailable(3 * time.Second)}}, CodeReplicaUnavailable, 3 * time.Second},
		{"a result after the wait is too late", 0, []answer{{0, unavailable(3 * time.Second)}, {4 * time.Second, nil}}, CodeReplicaUnavailable, 3 * time.Second},
		{"a second replica error leaves the wait as it was", 0, []answer{{0, unavailable(3 * time.Second)}, {time.Second, unavailable(3 * time.Second)}, {2 * time.Second, nil}}, 0, 2 * time.Second},
		{"the wait is bounded", 0, []answer{{0, unavailable(time.Minute)}}, CodeReplicaUnavailable, maxReplicaErrorWait},
		{"the request timeout ends the wait with the error", 2 * time.Second, []answer{{0, unavailable(3 * time.Second)}}, CodeReplicaUnavailable, 2 * time.Second},
		{"an error that asks for no wait is at once", 0, []answer{{0, lost}, {time.Second, nil}}, CodeReplicaLost, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newTestClientConn(t, ClientOptions{RequestTimeout: tc.timeout}, &fakePool{})
				defer c.Close()
				id := mcpmsg.IntID(5)
				p := c.track(&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)})
				evt := nostr.Event{ID: nostr.ID{1}, Tags: nostr.Tags{{"e", nostr.ID{1}.Hex()}}}
				c.pending.addEvent(p, evt.ID)
				start := time.Now()
				var got *jsonrpc.Response
				var gotAt time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					got, gotAt = (<-c.incoming).(*jsonrpc.Response), time.Since(start)
				}()
				for _, a := range tc.answers {
					time.Sleep(a.at - time.Since(start)) // synctest clock: the answer's moment
					resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"content":[]}`)}
					if a.err != nil {
						resp = &jsonrpc.Response{ID: id, Error: a.err}
					}
					c.handleResponse(evt, 0, resp)
				}
				<-done
				var code int64
				var werr *jsonrpc.Error
				if errors.As(got.Error, &werr) {
					code = werr.Code
				}
				if code != tc.want || gotAt != tc.wantAt {
					t.Fatalf("the go-sdk got code %d after %v; want %d after %v", code, gotAt, tc.want, tc.wantAt)
				}
				time.Sleep(time.Minute) // synctest clock: long past every deadline
				synctest.Wait()
				select {
				case msg := <-c.incoming:
					t.Fatalf("a second answer reached the go-sdk: %v", msg)
				default:
				}
			})
		})
	}
}
