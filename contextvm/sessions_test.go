package contextvm

import (
	"errors"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/admission"
)

func TestSessionTable(t *testing.T) {
	s := &Server{} // for newServerConn's parent lifetime
	s.life = newLifetime(t.Context())
	const grace = 30 * time.Second
	now := time.Now()
	allowed := nostr.Generate().Public()
	tab := newSessionTable(admission.Policy{Max: 2, Grace: grace}, func(pk nostr.PubKey) bool { return pk == allowed })
	conn := func(client nostr.PubKey) func(uint64) *ServerConn {
		return func(n uint64) *ServerConn { return newServerConn(s, client, "") }
	}
	start := func(client nostr.PubKey) (*ServerConn, []*ServerConn, time.Duration, error) {
		return tab.start(client, now, conn(client))
	}
	quiet := func(c *ServerConn, d time.Duration) { c.active = now.Add(-d) }

	a, b, c := nostr.Generate().Public(), nostr.Generate().Public(), nostr.Generate().Public()
	ca, retired, _, err := start(a)
	if err != nil || len(retired) != 0 || tab.get(a) != ca {
		t.Fatal("first session")
	}
	ca2, retired, _, _ := start(a)
	if len(retired) != 1 || retired[0] != ca || tab.get(a) != ca2 {
		t.Fatal("a new session of a client retires its old one")
	}
	cb, _, _, _ := start(b)
	quiet(ca2, 10*time.Second)
	quiet(cb, 20*time.Second)

	// Full, and both sessions were active within the grace period.
	_, _, retry, err := start(c)
	if !errors.Is(err, errNoSession) || retry != 10*time.Second {
		t.Fatalf("a newcomer to a table of young sessions: %v, retry %v; want errNoSession, retry 10s", err, retry)
	}
	if _, retired, _, err := start(a); err != nil || len(retired) != 1 {
		t.Fatal("a client may always replace its own session")
	}
	ca3 := tab.get(a)

	// Quiet for longer than the grace period, but with a request in flight.
	quiet(cb, time.Hour)
	inFlight(t, cb, 1)
	if _, _, _, err := start(c); !errors.Is(err, errNoSession) {
		t.Fatalf("a session with a request in flight was evicted: %v", err)
	}
	cb.routes = newRouteTable()
	cc, retired, _, err := start(c)
	if err != nil || len(retired) != 1 || retired[0] != cb || tab.get(b) != nil {
		t.Fatalf("an old idle session does not give way: %v", err)
	}

	// An allowed client's session gives way to no stranger, and a
	// stranger's goes first.
	tab.remove(ca3)
	cal, _, _, _ := start(allowed)
	quiet(cal, 2*time.Hour)
	quiet(cc, time.Hour)
	if _, retired, _, err := start(b); err != nil || retired[0] != cc {
		t.Fatalf("a stranger's idle session should give way first: %v", err)
	}
	quiet(tab.get(b), time.Hour)
	d := nostr.Generate().Public()
	stranger, _, _, _ := start(d)
	if stranger == nil {
		t.Fatal("the other stranger's idle session should give way")
	}
	quiet(stranger, time.Hour)
	tab.remove(stranger)
	if _, _, _, err := start(nostr.Generate().Public()); err != nil {
		t.Fatal("a free slot is refused")
	}
	if _, _, retry, err := start(nostr.Generate().Public()); !errors.Is(err, errNoSession) || retry != grace {
		t.Fatalf("a stranger displaced an allowed client: %v, retry %v", err, retry)
	}
	if tab.get(allowed) != cal || tab.len() != 2 {
		t.Fatal("the allowed client's session is gone")
	}

	if idle := tab.idle(time.Now(), time.Minute); len(idle) != 1 || idle[0] != cal {
		t.Fatalf("idle: %v", idle)
	}
	inFlight(t, cal, 1)
	if idle := tab.idle(time.Now(), time.Minute); len(idle) != 0 {
		t.Fatal("a session with a request in flight is not idle")
	}
}

// Clients outside the allow-list hold at most the table less its reserve;
// an allowed client is never refused for room they hold, and the count of
// their sessions follows them out of the table.
func TestSessionTable_Reserve(t *testing.T) {
	s := &Server{}
	s.life = newLifetime(t.Context())
	now := time.Now()
	friends := map[nostr.PubKey]bool{nostr.Generate().Public(): true, nostr.Generate().Public(): true}
	tab := newSessionTable(admission.Policy{Max: 3, Reserve: 1, Grace: time.Minute}, func(pk nostr.PubKey) bool { return friends[pk] })
	start := func(client nostr.PubKey) (*ServerConn, []*ServerConn, error) {
		c, retired, _, err := tab.start(client, now, func(uint64) *ServerConn { return newServerConn(s, client, "") })
		return c, retired, err
	}
	s1, _, err1 := start(nostr.Generate().Public())
	s2, _, err2 := start(nostr.Generate().Public())
	if err1 != nil || err2 != nil {
		t.Fatal("strangers within their share refused")
	}
	if _, _, err := start(nostr.Generate().Public()); !errors.Is(err, errStrangerFull) {
		t.Fatalf("a third stranger in a table of 3 with a reserve of 1: %v; want errStrangerFull", err)
	}
	if _, _, err := start(s1.client); err != nil {
		t.Fatalf("a stranger replacing its own session: %v", err)
	}
	var friendList []nostr.PubKey
	for pk := range friends {
		friendList = append(friendList, pk)
	}
	if _, retired, err := start(friendList[0]); err != nil || len(retired) != 0 {
		t.Fatalf("an allowed client with the reserve free: %v, retired %d", err, len(retired))
	}
	// Full: a stranger's session gives way to the second allowed client,
	// young as it is, the least recently active first.
	s2.active = now.Add(-time.Second)
	tab.get(s1.client).active = now
	_, retired, err := start(friendList[1])
	if err != nil || len(retired) != 1 || retired[0] != s2 {
		t.Fatalf("an allowed client in a full table: %v, retired %v; want s2 to give way", err, retired)
	}
	if tab.unknown != 1 || tab.len() != 3 {
		t.Fatalf("%d strangers' sessions of %d counted; want 1 of 3", tab.unknown, tab.len())
	}
	tab.remove(tab.get(s1.client))
	if tab.unknown != 0 {
		t.Fatalf("a removed stranger's session still counts: %d", tab.unknown)
	}
}
