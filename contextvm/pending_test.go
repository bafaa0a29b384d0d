package contextvm

import (
	"encoding/json"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func pendingCall(id int64, params string) *pendingRequest {
	m := &jsonrpc.Request{ID: mcpmsg.IntID(id), Method: "tools/call", Params: json.RawMessage(params)}
	p := &pendingRequest{req: m, wire: m}
	p.token, _ = mcpmsg.ProgressToken(m)
	return p
}

func TestPendingTable(t *testing.T) {
	var tab pendingTable
	one := pendingCall(1, `{"_meta":{"progressToken":1}}`)
	str := pendingCall(2, `{"_meta":{"progressToken":"1"}}`)
	tab.add(one, nil)
	tab.add(str, nil)
	evt := nostr.ID{7}
	if !tab.addEvent(one, evt) || tab.forEvent(evt) != one {
		t.Fatal("an event id does not find its request")
	}
	if got := tab.withToken(one.token); len(got) != 1 || got[0] != one {
		t.Fatalf("token 1 finds %d requests", len(got))
	}
	if got := tab.withToken(str.token); len(got) != 1 || got[0] != str {
		t.Fatal(`token "1" does not find its own request only`)
	}
	if !tab.remove(one) || tab.remove(one) {
		t.Fatal("a request was removed twice, or not once")
	}
	if tab.forEvent(evt) != nil || len(tab.withToken(one.token)) != 0 || tab.addEvent(one, nostr.ID{8}) {
		t.Fatal("a removed request is still found")
	}
	if tab.len() != 1 || !tab.isPending(str) {
		t.Fatal("removing one request removed another")
	}
}

func TestPendingTable_InjectedTokensAndTimers(t *testing.T) {
	var tab pendingTable
	p := pendingCall(1, `{}`)
	p.token = mcpmsg.StringToken("cvm-transfer-x")
	p.wire = &jsonrpc.Request{ID: p.req.ID, Method: p.req.Method}
	fired := make(chan struct{}, 1)
	tab.add(p, func(p *pendingRequest) {
		p.timer = time.AfterFunc(time.Hour, func() { fired <- struct{}{} })
	})
	if !tab.injected(p.token) || tab.injected(mcpmsg.StringToken("other")) {
		t.Fatal("injected tokens")
	}
	tab.keepAlive(p.token, time.Nanosecond)
	<-fired // keepAlive reset the timer to fire at once
	tab.keepAlive(p.token, time.Hour)
	tab.remove(p)
	if p.timer.Stop() {
		t.Fatal("remove left the timer running")
	}
}

// A new request under the id of one in flight replaces it.
func TestPendingTable_ReusedID(t *testing.T) {
	var tab pendingTable
	a, b := pendingCall(1, `{"_meta":{"progressToken":"a"}}`), pendingCall(1, `{}`)
	tab.add(a, nil)
	tab.add(b, nil)
	if tab.isPending(a) || !tab.isPending(b) || len(tab.withToken(a.token)) != 0 {
		t.Fatal("the replaced request is still pending")
	}
}
