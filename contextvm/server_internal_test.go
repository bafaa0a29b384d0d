package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newTestServer is a server that publishes into pool and listens to
// nothing: tests hand it frames and sessions themselves.
func newTestServer(t *testing.T, opts ServerOptions, pool relayPool) *Server {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	return newServer(opts.withDefaults(), testEndpoint(t, pool))
}

// inFlight puts n requests in flight on c, as if the go-sdk were handling
// them.
func inFlight(t *testing.T, c *ServerConn, n int) {
	t.Helper()
	for i := range n {
		r := &route{origID: mcpmsg.IntID(int64(i)), eventID: nostr.ID{byte(i), 1}, method: "tools/call"}
		if c.routes.add(fmt.Sprint(i), r) != added {
			t.Fatal("route not added")
		}
	}
}

func startFrame(token string) progressFrame {
	return progressFrame{ProgressToken: mcpmsg.StringToken(token), Progress: 1, CVM: &transferFrame{Type: oversizedType, FrameType: "start",
		Digest: digestOf("x"), TotalBytes: intPtr(1), TotalChunks: intPtr(1)}}
}

// A transfer that expires while the server runs is aborted towards its
// sender; one still in progress at Close is forgotten, and its timer never
// fires (it used to, and published through a closed server).
func TestServer_TransferTimersEndWithClose(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("close first ", closeFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pool := &fakePool{}
				s := newTestServer(t, ServerOptions{Transfers: TransferLimits{Timeout: time.Second}}, pool)
				if _, _, _, err := s.transfers.frame(nostr.Generate().Public(), startFrame("slow"), nil); err != nil {
					t.Fatal(err)
				}
				if closeFirst {
					s.Close()
				}
				time.Sleep(time.Minute) // synctest clock: long past every deadline
				synctest.Wait()
				want := 1
				if closeFirst {
					want = 0
				}
				if n := pool.count(); n != want {
					t.Fatalf("%d abort frames published, want %d", n, want)
				}
				s.Close()
			})
		})
	}
}

// Closing a session answers everything it has in flight at once, well
// within abortGrace, however many requests there are: one after the other
// under one deadline, as before, the last ones went unanswered.
func TestServerConn_CloseAnswersInFlightConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &fakePool{latency: 100 * time.Millisecond}
		s := newTestServer(t, ServerOptions{}, pool)
		defer s.Close()
		c, _ := s.newSession(nostr.Generate().Public(), false)
		inFlight(t, c, 100)
		start := time.Now()
		c.Close()
		if elapsed := time.Since(start); elapsed >= abortGrace {
			t.Errorf("Close took %s", elapsed)
		}
		if n := pool.count(); n != 100 {
			t.Fatalf("%d of 100 requests answered", n)
		}
		for _, evt := range pool.published {
			msgs, _, err := DecodeContent(evt.Content)
			var werr *jsonrpc.Error
			if err != nil || !errors.As(msgs[0].(*jsonrpc.Response).Error, &werr) || werr.Code != CodeTransportError {
				t.Fatalf("answer %s", evt.Content)
			}
		}
	})
}

// A relay that never answers holds a closing session up for abortGrace,
// no longer.
func TestServerConn_CloseIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t, ServerOptions{}, &fakePool{block: true})
		defer s.Close()
		c, _ := s.newSession(nostr.Generate().Public(), false)
		inFlight(t, c, 3*maxAnswersAtClose)
		start := time.Now()
		c.Close()
		if elapsed := time.Since(start); elapsed != abortGrace {
			t.Fatalf("Close took %s, want %s", elapsed, abortGrace)
		}
	})
}

// Once Close has begun, a session publishes nothing but its answers: a
// notification written while it answers fails with ErrConnectionClosed.
func TestServerConn_WriteDuringCloseSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &fakePool{block: true}
		s := newTestServer(t, ServerOptions{}, pool)
		defer s.Close()
		c, _ := s.newSession(nostr.Generate().Public(), false)
		inFlight(t, c, 1)
		closed := make(chan struct{})
		go func() {
			c.Close()
			close(closed)
		}()
		synctest.Wait() // Close is publishing its answer to a relay that does not answer
		if n := pool.count(); n != 1 {
			t.Fatalf("%d events published, want the answer", n)
		}
		note := &jsonrpc.Request{Method: mcpmsg.MethodLogMessage, Params: json.RawMessage(`{"level":"info","data":"late"}`)}
		if err := c.Write(context.Background(), note); !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Fatalf("Write during Close: %v", err)
		}
		<-closed
		if err := c.Write(context.Background(), note); !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Fatalf("Write after Close: %v", err)
		}
		if n := pool.count(); n != 1 {
			t.Fatalf("%d events published, want only the answer", n)
		}
	})
}

// A session replaced by a newer one keeps answering its requests in
// flight; if the server closes first, they are answered with an error
// like every other session's.
func TestServer_CloseAnswersRetiredSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &fakePool{}
		s := newTestServer(t, ServerOptions{}, pool)
		client := nostr.Generate().Public()
		old, _ := s.newSession(client, false)
		inFlight(t, old, 2)
		s.newSession(client, false) // a new initialize retires old
		synctest.Wait()
		if s.Sessions() != 1 || pool.count() != 0 {
			t.Fatalf("%d sessions, %d events", s.Sessions(), pool.count())
		}
		s.Close()
		if n := pool.count(); n != 2 {
			t.Fatalf("%d of the retired session's 2 requests answered", n)
		}
	})
}

// A session replaced while idle closes; the server's books forget it.
func TestServer_RetiredIdleSessionCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t, ServerOptions{}, &fakePool{})
		defer s.Close()
		client := nostr.Generate().Public()
		old, _ := s.newSession(client, false)
		s.newSession(client, false)
		synctest.Wait()
		select {
		case <-old.closed:
		default:
			t.Fatal("the retired idle session is still open")
		}
		if n := len(s.sessions.all()); n != 1 {
			t.Fatalf("%d sessions live, want 1", n)
		}
	})
}
