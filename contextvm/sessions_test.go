package contextvm

import (
	"testing"
	"time"

	"fiatjaf.com/nostr"
)

func TestSessionTable(t *testing.T) {
	s := &Server{} // for newServerConn's parent lifetime
	s.life = newLifetime(t.Context())
	tab := newSessionTable(2)
	conn := func(client nostr.PubKey) func(uint64) *ServerConn {
		return func(n uint64) *ServerConn { return newServerConn(s, client, "") }
	}
	a, b, c := nostr.Generate().Public(), nostr.Generate().Public(), nostr.Generate().Public()
	ca, retired := tab.start(a, conn(a))
	if len(retired) != 0 || tab.get(a) != ca {
		t.Fatal("first session")
	}
	ca2, retired := tab.start(a, conn(a))
	if len(retired) != 1 || retired[0] != ca || tab.get(a) != ca2 {
		t.Fatal("a new session of a client retires its old one")
	}
	cb, _ := tab.start(b, conn(b))
	tab.touch(ca2) // a is now the most recent
	_, retired = tab.start(c, conn(c))
	if len(retired) != 1 || retired[0] != cb || tab.get(b) != nil {
		t.Fatal("beyond max, the least recently active session is evicted")
	}
	if tab.len() != 2 || len(tab.all()) != 4 {
		t.Fatalf("%d current, %d live; want 2 and 4 (retired ones live until closed)", tab.len(), len(tab.all()))
	}
	tab.remove(ca)
	tab.remove(cb)
	if len(tab.all()) != 2 {
		t.Fatal("removed sessions are still live")
	}
	ca2.active = time.Now().Add(-time.Hour)
	if idle := tab.idle(time.Now(), time.Minute); len(idle) != 1 || idle[0] != ca2 {
		t.Fatalf("idle: %v", idle)
	}
	inFlight(t, ca2, 1)
	if idle := tab.idle(time.Now(), time.Minute); len(idle) != 0 {
		t.Fatal("a session with a request in flight is not idle")
	}
}
