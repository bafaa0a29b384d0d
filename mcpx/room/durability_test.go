package room_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

// stallStore is a history whose commits a test holds back: while stalled,
// appended records wait in memory (they have their place in the queue, and
// nobody hears of their commit) until release hands them on, in order.
type stallStore struct {
	*history.Store
	mu        sync.Mutex
	stalled   bool
	held      []stalledAppend
	failWith  error         // commits are reported with this error
	queryGate chan struct{} // Query waits for it to close
}

type stalledAppend struct {
	topic     string
	r         history.Record
	committed func(error)
}

func newStallStore(t *testing.T, opts history.Options) *stallStore {
	st, err := history.Open(filepath.Join(t.TempDir(), "history.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &stallStore{Store: st}
	t.Cleanup(func() {
		s.release()
		st.Close()
	})
	return s
}

func (s *stallStore) stall() {
	s.mu.Lock()
	s.stalled = true
	s.mu.Unlock()
}

// release commits what was held back and stops stalling.
func (s *stallStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = false
	for _, a := range s.held {
		s.Store.Append(a.topic, a.r, a.committed) // under mu: in order with later appends
	}
	s.held = nil
}

func (s *stallStore) Append(topic string, r history.Record, committed func(error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWith != nil {
		fail := s.failWith
		return s.Store.Append(topic, r, func(error) { committed(fail) })
	}
	if s.stalled {
		s.held = append(s.held, stalledAppend{topic, r, committed})
		return nil
	}
	return s.Store.Append(topic, r, committed)
}

func (s *stallStore) Query(ctx context.Context, topic string, q history.Query) (history.Page, error) {
	s.mu.Lock()
	gate := s.queryGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.Store.Query(ctx, topic, q)
}

// An envelope is echoed to its sender, with its seq, only once it is
// committed, in its place in the topic's order: whatever the sender would
// have received after it waits behind it. The other participants get it
// at once.
func TestGateway_EchoWaitsForTheCommitAndKeepsItsPlace(t *testing.T) {
	st := newStallStore(t, history.Options{})
	g := gatewaytest.Start(t, room.Options{History: st})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	c, _ := g.Join("room:x", "carol")
	a.Read() // bob's join
	a.Read() // carol's join
	b.Read()

	st.stall()
	var released atomic.Bool
	type frame struct {
		id    string
		early bool // arrived before the commit was released
		err   error
	}
	got := make(chan frame, 2)
	go func() {
		for range 2 {
			m, err := a.TryRead(10 * time.Second)
			if err != nil {
				got <- frame{err: err}
				return
			}
			got <- frame{id: m.ID, early: !released.Load()}
		}
	}()
	sent := a.Chat("first")
	if m := b.Read(); m.ID != sent["id"] || m.Seq == 0 {
		t.Fatalf("bob got %s, want alice's envelope before its commit", m)
	}
	later := b.Chat("second")
	for _, want := range []any{sent["id"], later["id"]} {
		if m := c.Read(); m.ID != want {
			t.Fatalf("carol got %s, want %s", m, want)
		}
	}
	released.Store(true)
	st.release()
	// Her echo, then bob's envelope: the order every connection sees.
	for _, want := range []any{sent["id"], later["id"]} {
		f := <-got
		switch {
		case f.err != nil:
			t.Fatalf("alice: %v", f.err)
		case f.early:
			t.Fatalf("alice got %s before her envelope was committed", f.id)
		case f.id != want:
			t.Fatalf("alice got %s, want %s", f.id, want)
		}
	}
}

// A full commit queue holds the publisher's read loop, outside the topic's
// lock: the topic goes on (joins, presence, what was already published
// reaches everyone) and the waiting envelope goes out once there is room.
func TestGateway_FullCommitQueuePushesBackThePublisherNotTheTopic(t *testing.T) {
	st := newStallStore(t, history.Options{QueueSize: 1})
	g := gatewaytest.Start(t, room.Options{History: st})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	a.Read()
	st.stall()
	first := a.Chat("takes the only place")
	if m := b.Read(); m.ID != first["id"] {
		t.Fatalf("bob got %s", m)
	}
	second := a.Chat("waits for room")
	// carol's join goes through the topic while alice's read loop waits.
	g.Join("room:x", "carol")
	if m := b.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "carol" {
		t.Fatalf("bob got %s, want carol's join while alice waits for room", m)
	}
	st.release()
	if m := b.Read(); m.ID != second["id"] || m.Seq <= 1 {
		t.Fatalf("bob got %s, want alice's second envelope once there was room", m)
	}
	for _, want := range []any{first["id"], nil, second["id"]} { // nil: carol's join
		if m := a.Read(); want != nil && m.ID != want {
			t.Fatalf("alice got %s, want %v", m, want)
		}
	}
}

// One connection may have at most MaxUncommitted envelopes waiting for
// their commit, so that it cannot take the whole queue from the others.
func TestGateway_OnePublisherCannotTakeTheWholeCommitQueue(t *testing.T) {
	st := newStallStore(t, history.Options{QueueSize: 3})
	g := gatewaytest.Start(t, room.Options{History: st, MaxUncommitted: 2})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	c, _ := g.Join("room:x", "carol")
	a.Read()
	a.Read()
	b.Read()
	st.stall()
	var sent []any
	for i := range 3 {
		sent = append(sent, a.Chat(fmt.Sprint("a", i))["id"])
	}
	for _, want := range sent[:2] {
		if m := c.Read(); m.ID != want {
			t.Fatalf("carol got %s, want %s", m, want)
		}
	}
	bobs := b.Chat("bob gets the third place")
	if m := c.Read(); m.ID != bobs["id"] {
		t.Fatalf("carol got %s, want bob's envelope: alice's third waits for her window", m)
	}
	st.release()
	if m := c.Read(); m.ID != sent[2] {
		t.Fatalf("carol got %s, want alice's third", m)
	}
}

// One connection's envelopes waiting for their commit are bounded in
// bytes too (4 MiB; an envelope larger than that goes alone), as they are
// on their way to JetStream on a cluster: large envelopes hold the read
// loop sooner, and another connection's envelope goes ahead.
func TestGateway_OnePublishersUncommittedBytesAreBounded(t *testing.T) {
	st := newStallStore(t, history.Options{})
	g := gatewaytest.Start(t, room.Options{History: st})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	c, _ := g.Join("room:x", "carol")
	a.Read()
	a.Read()
	b.Read()
	st.stall()
	blob := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/x","params":{"blob":%q}}`, strings.Repeat("x", 900<<10))
	var sent []any
	for range 5 {
		e := a.Env(nil, blob)
		a.Send(e)
		sent = append(sent, e["id"])
	}
	for _, want := range sent[:4] { // 3.6 MiB; a fifth would pass 4 MiB
		if m := c.Read(); m.ID != want {
			t.Fatalf("carol got %s, want %s", m.ID, want)
		}
	}
	testwait.Eventually(t, 30*time.Second, "alice's read loop to wait for room in bytes", func() bool {
		v, _ := g.Metric(`cvm_mcpx_publisher_waits_total{bound="bytes"}`)
		return v >= 1
	})
	bobs := b.Chat("bob goes ahead")
	if m := c.Read(); m.ID != bobs["id"] {
		t.Fatalf("carol got %s, want bob's envelope: alice's fifth waits for room", m.ID)
	}
	st.release()
	if m := c.Read(); m.ID != sent[4] {
		t.Fatalf("carol got %s, want alice's fifth", m.ID)
	}
}

// An envelope that could not be stored was still delivered; its sender
// gets an error instead of an echo, so it does not count it as stored.
func TestGateway_FailedCommitIsAnErrorNotAnEcho(t *testing.T) {
	st := newStallStore(t, history.Options{})
	g := gatewaytest.Start(t, room.Options{History: st})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	a.Read()
	st.mu.Lock()
	st.failWith = errors.New("disk on fire")
	st.mu.Unlock()
	sent := a.Chat("lost")
	if m := b.Read(); m.ID != sent["id"] {
		t.Fatalf("bob got %s", m)
	}
	a.ExpectError(mcpx.CodeInternal, sent["id"].(string))
}

// The reference welcome's history tail is read outside the topic's lock:
// a query waits for the commit queue, and the topic must not. What is
// published meanwhile reaches the joiner after its welcome, not in it.
func TestGateway_ReferenceWelcomeReadsHistoryOutsideTheTopicLock(t *testing.T) {
	st := newStallStore(t, history.Options{})
	g := gatewaytest.Start(t, room.Options{History: st, Compat: room.CompatReference})
	a, _ := g.Join("room:x", "alice")
	before := a.Chat("before carol")
	a.Read()
	gate := make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) }) // before the gateway's close, which waits for carol's join
	st.mu.Lock()
	st.queryGate = gate
	st.mu.Unlock()
	c := g.Dial("room:x", "carol")
	if m := a.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "carol" {
		t.Fatalf("alice got %s, want carol's join", m)
	}
	during := a.Chat("while carol's welcome reads history")
	if m := a.Read(); m.ID != during["id"] {
		t.Fatalf("alice got %s, want her envelope while carol's welcome waits", m)
	}
	open.Do(func() { close(gate) })
	if m := c.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "carol" {
		t.Fatalf("carol got %s, want her join first", m)
	}
	w := c.Read()
	tail, _ := w.Field("history").([]any)
	if w.Event() != "welcome" || len(tail) != 1 || tail[0].(map[string]any)["id"] != before["id"] {
		t.Fatalf("carol's welcome %s, want a tail of %s only", w, before["id"])
	}
	if m := c.Read(); m.ID != during["id"] {
		t.Fatalf("carol got %s, want the envelope published during her welcome", m)
	}
}
