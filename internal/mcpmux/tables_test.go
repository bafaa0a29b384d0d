package mcpmux

import (
	"slices"
	"testing"

	"github.com/cvmgo/cvm/internal/mcpmsg"
)

func TestSubscriptions_FirstAndLastAreTold(t *testing.T) {
	subs := newSubscriptions()
	a, b := &Session{}, &Session{}
	if !subs.add(a, "u") {
		t.Fatal("the first subscriber was not told upstream")
	}
	if subs.add(b, "u") {
		t.Fatal("a second subscriber was told upstream")
	}
	if again := subs.add(a, "u"); again {
		t.Fatal("a subscriber subscribing again was told upstream")
	}
	if subs.remove(a, "u") {
		t.Fatal("a subscriber other than the last was told upstream")
	}
	if twice := subs.remove(a, "u"); twice {
		t.Fatal("a subscriber unsubscribing twice was told upstream")
	}
	subs.add(a, "v")
	if got := subs.drop(b); !slices.Equal(got, []string{"u"}) {
		t.Fatalf("dropping b left unwatched %v; want [u]", got)
	}
	if got := subs.subscribers("v"); len(got) != 1 || got[0] != a {
		t.Fatalf("subscribers of v: %v", got)
	}
	if got := subs.uris(); !slices.Equal(got, []string{"v"}) {
		t.Fatalf("uris %v", got)
	}
}

func TestCalls_RenumberAndForget(t *testing.T) {
	tab := newCalls()
	s := &Session{}
	c1 := &call{s: s, origID: mcpmsg.IntID(1), token: mcpmsg.StringToken("t")}
	c2 := &call{s: s, origID: mcpmsg.IntID(1)} // the same id again, from the same caller
	tab.add(c1)
	tab.add(c2)
	if c1.upID == c2.upID || c1.upToken.IsZero() || !c2.upToken.IsZero() {
		t.Fatalf("upstream ids %v %v, tokens %v %v", c1.upID.Raw(), c2.upID.Raw(), c1.upToken, c2.upToken)
	}
	if s.InFlight() != 2 || tab.byUpToken(c1.upToken) != c1 {
		t.Fatal("books")
	}
	got, ok := tab.takeOf(s, mcpmsg.IntID(1))
	if !ok || (got != c1 && got != c2) {
		t.Fatal("takeOf")
	}
	rest := tab.takeAll(func(*call) bool { return true })
	// Off the books, but in flight for the caller until settled: their
	// answers are still on their way to it.
	if tab.len() != 0 || s.InFlight() != 2 || len(rest) != 1 {
		t.Fatalf("left %d, in flight %d, taken %d", tab.len(), s.InFlight(), len(rest))
	}
	got.settle()
	rest[0].settle()
	if s.InFlight() != 0 {
		t.Fatalf("in flight %d once settled", s.InFlight())
	}
}

func TestRouted_OnlyTheCallerItWentToAnswers(t *testing.T) {
	r := newRouted()
	a, b := &Session{}, &Session{}
	r.add(mcpmsg.IntID(1), route{s: a, gen: 3})
	if _, ok := r.take(mcpmsg.IntID(1), b); ok {
		t.Fatal("another caller answered")
	}
	if to, ok := r.take(mcpmsg.IntID(1), a); !ok || to.gen != 3 {
		t.Fatal("the caller could not answer")
	}
}
