package discovery_test

import (
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// A watch follows the relay lists of every server it knows. With 2,000 of
// them, one filter naming them all would be a REQ of 134 KB, which a relay
// that takes 64 KiB messages answers by closing the connection; the watch
// splits them, and a relay list from the last server still arrives.
func TestWatch_FollowsTwoThousandServers(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{MaxMessageBytes: 64 << 10}})
	p := pool(t, r)
	c := discovery.NewCatalog()
	keys := make([]nostr.SecretKey, 2000)
	for i := range keys {
		keys[i] = nostr.Generate()
		addAll(t, c, sign(t, keys[i], contextvm.KindServerAnnouncement, 1000, initContent("s"), nostr.Tag{"name", "S"}))
	}
	last := keys[len(keys)-1]

	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	changes := make(chan nostr.PubKey, 16)
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, p, func(pk nostr.PubKey) { changes <- pk }) }()

	// A watch starts a minute back, so a relay list published now reaches
	// it whether or not its subscriptions are live yet.
	list := sign(t, last, contextvm.KindRelayList, nostr.Now(), "", nostr.Tag{"r", "wss://moved.example.com"})
	if err := p.Publish(ctx, list); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, last.Public(), func() bool {
		s, ok := c.Server(last.Public())
		return ok && len(s.Relays) == 1 && s.Relays[0] == "wss://moved.example.com"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
