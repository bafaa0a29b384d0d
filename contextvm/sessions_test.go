package contextvm

import (
	"errors"
	"testing"
	"time"

	"fiatjaf.com/nostr"
)

func TestSessionTable(t *testing.T) {
	s := &Server{} // for newServerConn's parent lifetime
	s.life = newLifetime(t.Context())
	const grace = 30 * time.Second
	now := time.Now()
	allowed := nostr.Generate().Public()
	tab := newSessionTable(2, grace, func(pk nostr.PubKey) bool { return pk == allowed })
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
