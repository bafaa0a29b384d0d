package contextvm

import (
	"testing"

	"github.com/cvmgo/cvm/internal/mcpmsg"
)

func TestRouteTable(t *testing.T) {
	tab := newRouteTable()
	a := &route{origID: mcpmsg.IntID(1), token: mcpmsg.StringToken("t")}
	b := &route{origID: mcpmsg.StringID("1")}
	if tab.add("ka", a) != added || tab.add("kb", b) != added {
		t.Fatal("not added")
	}
	if tab.add("ka", &route{}) != duplicate {
		t.Fatal("a replayed request was added twice")
	}
	if key, ok := tab.keyOf(mcpmsg.IntID(1)); !ok || key != "ka" {
		t.Fatalf("id 1: %q %v", key, ok)
	}
	if key, ok := tab.keyOf(mcpmsg.StringID("1")); !ok || key != "kb" {
		t.Fatalf(`id "1": %q %v`, key, ok)
	}
	if key, r := tab.forToken(mcpmsg.StringToken("t")); key != "ka" || r != a {
		t.Fatal("token t")
	}
	if _, r := tab.forToken(mcpmsg.Token{}); r != nil {
		t.Fatal("no token found a route")
	}
	if tab.drop("ka") != a || tab.drop("ka") != nil {
		t.Fatal("drop")
	}
	if _, r := tab.forToken(mcpmsg.StringToken("t")); r != nil {
		t.Fatal("a dropped route is found by its token")
	}
	if left := tab.close(); len(left) != 1 || left[0] != b || tab.len() != 0 {
		t.Fatalf("close returned %d routes", len(left))
	}
	if tab.add("kc", &route{}) != refused {
		t.Fatal("a closed table took a route")
	}
}
