package contextvm

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A response whose request just sent progress waits what is left of
// progressSettle, but not on the caller of Write: the session's other
// writes go on meanwhile. A response with no recent progress goes at once.
func TestServerConn_ResponseSettlesOffTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &fakePool{}
		s := newTestServer(t, ServerOptions{Encryption: EncryptDisabled}, pool)
		defer s.Close()
		c := newServerConn(s, nostr.Generate().Public(), "")
		for i, progress := range []time.Time{time.Now(), {}} {
			r := &route{origID: mcpmsg.IntID(int64(i)), eventID: nostr.ID{byte(i), 1}, method: "tools/call", progress: progress}
			if c.routes.add(string(rune('a'+i)), r) != added {
				t.Fatal("route not added")
			}
		}
		published := func() int {
			pool.mu.Lock()
			defer pool.mu.Unlock()
			return len(pool.published)
		}

		start := time.Now()
		ctx := context.Background()
		if err := c.Write(ctx, &jsonrpc.Response{ID: mcpmsg.StringID("a"), Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Write waited %v for the progress to settle", waited)
		}
		synctest.Wait()
		if n := published(); n != 0 {
			t.Fatalf("the response went out before its progress settled (%d published)", n)
		}
		// Meanwhile another request's response goes out at once.
		if err := c.Write(ctx, &jsonrpc.Response{ID: mcpmsg.StringID("b"), Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if n := published(); n != 1 {
			t.Fatalf("%d published after the second response, want 1", n)
		}
		time.Sleep(progressSettle) // synctest clock: the settle delay passes
		synctest.Wait()
		if n := published(); n != 2 {
			t.Fatalf("%d published once the progress settled, want 2", n)
		}
		pool.mu.Lock()
		defer pool.mu.Unlock()
		if e, _ := firstTagValue(pool.published[1].Tags, "e"); e != (nostr.ID{0, 1}).Hex() {
			t.Errorf("the held response answers %s", e)
		}
		c.Close()
	})
}
