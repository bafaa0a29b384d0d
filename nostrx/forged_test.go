package nostrx_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// lyingRelay answers every REQ with the events it is given, whatever they
// are and whatever the filter: the relay a subscriber must not trust.
func lyingRelay(t *testing.T, events ...nostr.Event) string {
	return relaytest.Scripted(t, func([]nostr.Filter) relaytest.Answer { return relaytest.Answer{Events: events, EOSE: true} })
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
