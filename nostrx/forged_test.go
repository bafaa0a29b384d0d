package nostrx_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/nostrx"
)

// lyingRelay answers every REQ with the events it is given, whatever they
// are and whatever the filter: the relay a subscriber must not trust.
func lyingRelay(t *testing.T, events ...nostr.Event) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			_, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			var msg []json.RawMessage
			if json.Unmarshal(data, &msg) != nil || string(msg[0]) != `"REQ"` {
				continue
			}
			var sub string
			json.Unmarshal(msg[1], &sub)
			for _, evt := range events {
				frame, _ := json.Marshal([]any{"EVENT", sub, evt})
				c.Write(r.Context(), websocket.MessageText, frame)
			}
			frame, _ := json.Marshal([]any{"EOSE", sub})
			c.Write(r.Context(), websocket.MessageText, frame)
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestPool_DropsForgedAndUnmatchedEvents(t *testing.T) {
	me := nostr.Generate().Public()
	author := nostr.Generate()
	good := signed(t, author, 25910, "good", nostr.Tag{"p", me.Hex()})
	forged := signed(t, author, 25910, "forged", nostr.Tag{"p", me.Hex()})
	forged.Content = "tampered"
	forged.SetID() // a valid id, a signature that no longer matches
	badID := signed(t, author, 25910, "bad id", nostr.Tag{"p", me.Hex()})
	badID.ID[0] ^= 1
	notForMe := signed(t, author, 25910, "someone else's", nostr.Tag{"p", nostr.Generate().Public().Hex()})

	var logs lockedLog
	p := newPool(t, nostrx.PoolOptions{
		Relays: []string{lyingRelay(t, forged, badID, notForMe, good)},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	sub := p.Subscribe(nostr.Filter{Kinds: []nostr.Kind{25910}, Tags: nostr.TagMap{"p": {me.Hex()}}}, 0)
	defer sub.Close()
	got, ok := within(t, sub.Events(), 5*time.Second)
	if !ok || got.ID != good.ID {
		t.Fatalf("first delivered event %q, want only the genuine one", got.Content)
	}
	if extra, ok := within(t, sub.Events(), 300*time.Millisecond); ok {
		t.Fatalf("delivered %q too", extra.Content)
	}
	if n := strings.Count(logs.String(), "bad id or signature"); n != 2 {
		t.Errorf("%d log lines about forged events, want 2:\n%s", n, logs.String())
	}
}
