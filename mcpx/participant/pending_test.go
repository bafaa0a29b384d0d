package participant

import (
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/internal/testwait"
)

func TestPendingTable_ARequestLeavesOnce(t *testing.T) {
	tab := newPendingTable(time.Hour)
	p := &pending{envID: "e1", peer: "bob", method: "tools/call", wireID: tab.nextWireID(), token: mcpmsg.StringToken("mcpx-1")}
	if err := tab.add(p, func(*pending) { t.Error("expired") }); err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.takeAnswered("e1", "mallory"); ok {
		t.Fatal("an answer from another peer completed the request")
	}
	if got, ok := tab.progressed(mcpmsg.StringToken("mcpx-1"), "bob"); !ok || got != p {
		t.Fatal("progress did not find the request by its token")
	}
	if got, ok := tab.takeAnswered("e1", "bob"); !ok || got != p {
		t.Fatal("the answer did not complete the request")
	}
	if tab.forget(p) {
		t.Fatal("a request left the table twice")
	}
	if _, ok := tab.progressed(mcpmsg.StringToken("mcpx-1"), "bob"); ok {
		t.Fatal("the token outlived the request")
	}
}

func TestPendingTable_TimeoutAndClose(t *testing.T) {
	tab := newPendingTable(10 * time.Millisecond)
	expired := make(chan *pending, 1)
	p := &pending{envID: "e1", peer: "bob"}
	tab.add(p, func(p *pending) {
		if tab.forget(p) {
			expired <- p
		}
	})
	select {
	case got := <-expired:
		if got != p {
			t.Fatal("another request expired")
		}
	case <-time.After(testwait.Timeout(patience)):
		t.Fatal("the request never expired")
	}
	q := &pending{envID: "e2", peer: "bob"}
	tab.add(q, func(*pending) {})
	if all := tab.close(); len(all) != 1 || all[0] != q {
		t.Fatalf("close took %v", all)
	}
	if err := tab.add(&pending{envID: "e3"}, func(*pending) {}); err == nil {
		t.Fatal("a closed table took a request")
	}
}
