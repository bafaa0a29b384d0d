package discovery_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// publish stores events on a relay.
func publish(t *testing.T, r *relay.Server, evts ...nostr.Event) {
	t.Helper()
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer p.Close()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	for _, e := range evts {
		if err := p.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
}

// A server that listens on relay A and publishes its announcements and
// relay list only on relay B (contextvm.ServerOptions.AnnounceRelays) is
// found on A by its key alone, through B; the second time from the cache,
// with B gone.
func TestLocate_ThroughADiscoveryRelay(t *testing.T) {
	a := relaytest.Start(t, relay.Options{})
	b := relaytest.Start(t, relay.Options{})
	key := nostr.Generate()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(key), Relays: []string{a.URL}, AnnounceRelays: []string{b.URL},
		Info: contextvm.ServerInfo{Name: "located"}, Announce: true, OpenStreams: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), translator("located"))
	defer srv.Close()
	waitForRelayList(t, b, key.Public())
	if evts := query(t, a, key.Public()); len(evts) == 0 {
		t.Fatal("the server did not announce on its own relay either")
	}

	cache := discovery.OpenRelayCache(filepath.Join(t.TempDir(), "relays.json"), discovery.RelayCacheOptions{})
	pk := nostrx.PublicKey{Key: key.Public()}
	loc, err := discovery.Locate(ctx, pk, discovery.LocateOptions{DiscoveryRelays: []string{b.URL}, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Source != discovery.FromRelayList || !slices.Equal(loc.Relays, []string{a.URL}) || !slices.Equal(loc.From, []string{b.URL}) {
		t.Fatalf("located %+v; want %s from the relay list on %s", loc, a.URL, b.URL)
	}
	if loc.Announcement == nil || loc.Announcement.Name != "located" || !loc.Announcement.OpenStreams || len(loc.Announcement.Tools) != 1 {
		t.Errorf("announcement %+v; want the server's, read with the relay list", loc.Announcement)
	}
	if !strings.Contains(loc.Explain(), "from the server's relay list on "+b.URL) {
		t.Errorf("explained as %q", loc.Explain())
	}

	b.Close() // what was learned is cached
	loc, err = discovery.Locate(ctx, pk, discovery.LocateOptions{DiscoveryRelays: []string{b.URL}, Cache: cache})
	if err != nil || loc.Source != discovery.FromCache || !slices.Equal(loc.Relays, []string{a.URL}) {
		t.Fatalf("second lookup %+v, %v; want %s from the cache", loc, err, a.URL)
	}
}

func waitForRelayList(t *testing.T, r *relay.Server, pk nostr.PubKey) {
	t.Helper()
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer p.Close()
	sub := p.Subscribe(nostr.Filter{Authors: []nostr.PubKey{pk}, Kinds: []nostr.Kind{contextvm.KindRelayList}}, 1)
	defer sub.Close()
	select {
	case <-sub.Events():
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("no relay list was published")
	}
}

func query(t *testing.T, r *relay.Server, pk nostr.PubKey) []nostr.Event {
	t.Helper()
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer p.Close()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	evts, err := p.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{pk}, Kinds: contextvm.AnnouncementKinds})
	if err != nil {
		t.Fatal(err)
	}
	return evts
}

func TestLocate_Precedence(t *testing.T) {
	b := relaytest.Start(t, relay.Options{})
	key := nostr.Generate()
	publish(t, b, sign(t, key, contextvm.KindRelayList, nostr.Now(), "", nostr.Tag{"r", "ws://127.0.0.1:9"}))
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	pk := nostrx.PublicKey{Key: key.Public()}

	loc, err := discovery.Locate(ctx, pk, discovery.LocateOptions{Relays: []string{"wss://given.example"}, DiscoveryRelays: []string{b.URL}})
	if err != nil || loc.Source != discovery.FromGiven || !slices.Equal(loc.Relays, []string{"wss://given.example"}) {
		t.Errorf("given relays: %+v, %v", loc, err)
	}
	hinted := nostrx.PublicKey{Key: key.Public(), Relays: []string{"wss://hint.example"}}
	loc, err = discovery.Locate(ctx, hinted, discovery.LocateOptions{DiscoveryRelays: []string{b.URL}})
	if err != nil || loc.Source != discovery.FromHints || !slices.Equal(loc.Relays, []string{"wss://hint.example"}) || !strings.Contains(loc.Explain(), "nprofile") {
		t.Errorf("nprofile hints: %+v, %v", loc, err)
	}
	loc, err = discovery.Locate(ctx, pk, discovery.LocateOptions{DiscoveryRelays: []string{b.URL}, Fallback: []string{"wss://fallback.example"}})
	if err != nil || loc.Source != discovery.FromRelayList || !slices.Equal(loc.Relays, []string{"ws://127.0.0.1:9"}) {
		t.Errorf("relay list: %+v, %v", loc, err)
	}
	nobody := nostrx.PublicKey{Key: nostr.Generate().Public()}
	loc, err = discovery.Locate(ctx, nobody, discovery.LocateOptions{DiscoveryRelays: []string{b.URL}, Fallback: []string{"wss://fallback.example"}})
	if err != nil || loc.Source != discovery.FromFallback || !slices.Equal(loc.Relays, []string{"wss://fallback.example"}) || !errors.Is(loc.LookupErr, discovery.ErrNoRelayList) {
		t.Errorf("no relay list: %+v, %v", loc, err)
	}
	if _, err := discovery.Locate(ctx, pk, discovery.LocateOptions{DiscoveryRelays: []string{"https://b.example"}}); !errors.Is(err, nostrx.ErrBadRelayURL) {
		t.Errorf("malformed discovery relay: %v", err)
	}
}

// A hostile relay list is ignored with a warning, and the fallback used.
func TestLocate_HostileRelayList(t *testing.T) {
	b := relaytest.Start(t, relay.Options{})
	key := nostr.Generate()
	tags := []nostr.Tag{{"r", "https://evil.example"}, {"r", "ws://evil.example"}}
	publish(t, b, sign(t, key, contextvm.KindRelayList, nostr.Now(), "", tags...))
	var logs bytes.Buffer
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	loc, err := discovery.Locate(ctx, nostrx.PublicKey{Key: key.Public()}, discovery.LocateOptions{
		DiscoveryRelays: []string{b.URL}, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil || loc.Source != discovery.FromFallback || !slices.Equal(loc.Relays, []string{b.URL}) || !errors.Is(loc.LookupErr, discovery.ErrNoRelayList) {
		t.Fatalf("%+v, %v; want the discovery relay as the fallback", loc, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "evil.example") {
		t.Errorf("no warning naming what was ignored: %s", logs.String())
	}
}

// A discovery relay that does not answer costs at most the timeout.
func TestLocate_UnansweredLookupFallsBack(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	loc, err := discovery.Locate(ctx, nostrx.PublicKey{Key: nostr.Generate().Public()}, discovery.LocateOptions{
		DiscoveryRelays: []string{"ws://127.0.0.1:1"}, Fallback: []string{"ws://127.0.0.1:2"}, Timeout: 300 * time.Millisecond,
	})
	if err != nil || loc.Source != discovery.FromFallback || !errors.Is(loc.LookupErr, discovery.ErrLookupUnanswered) {
		t.Fatalf("%+v, %v", loc, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestRelayCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cvm", "relays.json")
	now := time.Now()
	clock := func() time.Time { return now }
	c := discovery.OpenRelayCache(path, discovery.RelayCacheOptions{Now: clock})
	pk := nostr.Generate().Public()
	if err := c.Put(pk, []string{"wss://a.example"}, []string{"wss://b.example"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, %v; want mode 0600", fi, err)
	}
	// Another process (another value) reads it.
	other := discovery.OpenRelayCache(path, discovery.RelayCacheOptions{Now: clock})
	if e, ok := other.Get(pk); !ok || !slices.Equal(e.Relays, []string{"wss://a.example"}) {
		t.Fatalf("got %+v, %v", e, ok)
	}
	now = now.Add(discovery.DefaultRelayCacheTTL)
	if _, ok := other.Get(pk); ok {
		t.Error("an entry a day old is still used")
	}
	now = now.Add(-2 * discovery.DefaultRelayCacheTTL)
	if _, ok := other.Get(pk); ok {
		t.Error("an entry from the future is used")
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Get(pk); ok {
		t.Error("a damaged file yields entries")
	}
	if err := other.Put(pk, []string{"wss://c.example"}, nil); err != nil {
		t.Fatalf("a damaged file is not replaced: %v", err)
	}
	if err := other.Forget(pk); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(pk); ok {
		t.Error("a forgotten entry is still used")
	}
}
