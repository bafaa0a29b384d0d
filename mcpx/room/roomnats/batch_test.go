package roomnats

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func encodeBatch(recs []batchRecord) []byte {
	var b []byte
	for _, r := range recs {
		b = appendBatchRecord(b, r)
	}
	return b
}

func TestBatchRecordsRoundTrip(t *testing.T) {
	recs := []batchRecord{
		{ID: "e1", From: "a", Pub: 1, Frame: []byte(`{"x":1}`)},
		{ID: "e2", From: "a", To: []string{"b", "c"}, Pub: 300, Frame: []byte(`{"x":2}`)},
		{ID: "e3", From: "b", Except: "b", Pub: 1 << 40, Frame: []byte{}},
		{ID: "", From: "", To: []string{}, Frame: bytes.Repeat([]byte("z"), 70000)},
	}
	got, err := decodeBatch(encodeBatch(recs), uint64(len(recs)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		w, g := recs[i], got[i]
		if g.ID != w.ID || g.From != w.From || g.Except != w.Except || g.Pub != w.Pub || !bytes.Equal(g.Frame, w.Frame) ||
			!slices.Equal(g.To, w.To) || (g.To == nil) != (w.To == nil) {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
	}
	// A count that does not match the data is refused, as are trailing
	// bytes and a truncation.
	data := encodeBatch(recs[:2])
	for _, bad := range []struct {
		data  []byte
		count uint64
	}{{data, 1}, {data, 3}, {data, 0}, {data[:len(data)-1], 2}, {append(data, 0), 2}, {data, 1 << 62}} {
		if _, err := decodeBatch(bad.data, bad.count); err == nil {
			t.Errorf("decodeBatch(%q, %d): no error", bad.data, bad.count)
		}
	}
}

// FuzzDecodeBatch: batch messages are read back from NATS, so their
// decoder must refuse, not panic on, whatever the stream holds; and what
// it accepts encodes back to the same records.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch([]batchRecord{{ID: "e1", From: "a", Pub: 1, Frame: []byte("{}")}, {ID: "e2", From: "a", To: []string{"b"}, Frame: []byte("{}")}}), uint64(2))
	f.Add(encodeBatch([]batchRecord{{ID: "e", From: "a", Except: "a", To: []string{}}}), uint64(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, count uint64) {
		recs, err := decodeBatch(data, count)
		if err != nil {
			return
		}
		if uint64(len(recs)) != count {
			t.Fatalf("%d records, header says %d", len(recs), count)
		}
		// Lengths may come in longer varints than the encoder writes, so
		// compare what the bytes mean, not the bytes.
		again, err := decodeBatch(encodeBatch(recs), count)
		if err != nil || !slices.EqualFunc(again, recs, func(x, y batchRecord) bool {
			return x.ID == y.ID && x.From == y.From && x.Except == y.Except && x.Pub == y.Pub && bytes.Equal(x.Frame, y.Frame) &&
				slices.Equal(x.To, y.To) && (x.To == nil) == (y.To == nil)
		}) {
			t.Fatalf("decoded, encoded and decoded again: %+v, %v; was %+v", again, err, recs)
		}
	})
}

// streamMsgs is how many messages the log stream holds.
func (tc *testCluster) streamMsgs() uint64 {
	tc.t.Helper()
	ctx, cancel := testwait.Context(tc.t, 10*time.Second)
	defer cancel()
	info, err := tc.cls[0].stream.Info(ctx)
	if err != nil {
		tc.t.Fatal(err)
	}
	return info.State.Msgs
}

// burst sends n chats from c without reading, and returns their ids.
func burst(c *gatewaytest.Client, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = c.Chat("burst " + strconv.Itoa(i))["id"].(string)
	}
	return out
}

// readSeqs reads n envelopes and checks their seqs are first, first+1, ...
func readSeqs(t *testing.T, c *gatewaytest.Client, first uint64, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		m := c.ReadEnvelope()
		if m.Seq != first+uint64(i) {
			t.Fatalf("%s: envelope %d is %s, want seq %d", c.ID, i, m, first+uint64(i))
		}
		out[i] = m.ID
	}
	return out
}

// A burst of one connection's envelopes goes to JetStream in fewer
// messages than envelopes (the appender puts what queued during an append
// into the next message), with gap-free seqs in the connection's order,
// each delivered once on every node, the echo included.
func TestNATS_BurstIsGroupCommitted(t *testing.T) {
	tc := startCluster(t, 2, room.Options{RatePerSecond: -1})
	a, _ := tc.nodes[0].Join("room", "a")
	b, _ := tc.nodes[1].Join("room", "b")
	a.Read() // b's join
	const n = 300
	sent := burst(a, n)
	for _, x := range []*gatewaytest.Client{a, b} {
		if got := readSeqs(t, x, 1, n); !slices.Equal(got, sent) {
			t.Fatalf("%s got %v\nwant %v", x.ID, got, sent)
		}
	}
	gatewaytest.Barrier(t, b, a) // and nothing more: each once
	msgs := tc.streamMsgs()
	if msgs >= n {
		t.Fatalf("%d envelopes in %d JetStream messages: not batched", n+1, msgs)
	}
	appends, _ := tc.nodes[0].Metric("cvm_mcpx_cluster_appends_total")
	messages, _ := tc.nodes[0].Metric("cvm_mcpx_cluster_append_messages_total")
	if appends != n || messages >= n || messages < 1 {
		t.Fatalf("node 0 appended %v envelopes in %v messages, want %d in fewer", appends, messages, n)
	}
	t.Logf("%d envelopes in %d messages", n+1, msgs)
	if latest, err := tc.cls[1].LatestSeq("room"); err != nil || latest != n+1 {
		t.Fatalf("LatestSeq %d, %v; want %d", latest, err, n+1)
	}
}

// Several connections of one node and of another append to one topic at
// once: batches from both nodes conflict and are encoded again with new
// seqs, which stay gap-free and never repeat; each connection's envelopes
// keep their order; every node delivers the same sequence.
func TestNATS_ConcurrentBatchesFromTwoNodes(t *testing.T) {
	tc := startCluster(t, 2, room.Options{RatePerSecond: -1})
	senders := []*gatewaytest.Client{}
	for i, id := range []string{"a", "b", "c", "d"} {
		c, _ := tc.nodes[i%2].Join("room", id)
		senders = append(senders, c)
	}
	r0, _ := tc.nodes[0].Join("room", "r0")
	r1, _ := tc.nodes[1].Join("room", "r1")
	tc.waitRoster("room", "a", "b", "c", "d", "r0", "r1")
	const per = 150
	sent := make([][]string, len(senders))
	var wg sync.WaitGroup
	for i, c := range senders {
		wg.Go(func() { sent[i] = burst(c, per) })
	}
	wg.Wait()
	total := per * len(senders)
	got0 := readSeqs(t, r0, 1, total)
	got1 := readSeqs(t, r1, 1, total)
	if !slices.Equal(got0, got1) {
		t.Fatal("the two nodes delivered different orders")
	}
	// Each sender's envelopes appear once, in its order.
	pos := map[string]int{}
	for i, id := range got0 {
		if _, dup := pos[id]; dup {
			t.Fatalf("%s delivered twice", id)
		}
		pos[id] = i
	}
	for i, ids := range sent {
		for j := 1; j < len(ids); j++ {
			if pos[ids[j]] <= pos[ids[j-1]] {
				t.Fatalf("sender %d: %s before %s", i, ids[j], ids[j-1])
			}
		}
	}
	// Each sender's echoes come in its order, with rising seqs.
	for i, c := range senders {
		var last uint64
		n := 0
		for n < per {
			m := c.ReadEnvelope()
			if m.Seq <= last {
				t.Fatalf("%s: seq %d after %d", c.ID, m.Seq, last)
			}
			last = m.Seq
			if m.From == c.ID {
				if m.ID != sent[i][n] {
					t.Fatalf("%s: echo %s, want %s", c.ID, m.ID, sent[i][n])
				}
				n++
			}
		}
	}
	if msgs := tc.streamMsgs(); msgs >= uint64(total) {
		t.Fatalf("%d envelopes in %d messages: not batched", total, msgs)
	}
	c0, _ := tc.nodes[0].Metric("cvm_mcpx_cluster_append_conflicts_total")
	c1, _ := tc.nodes[1].Metric("cvm_mcpx_cluster_append_conflicts_total")
	t.Logf("%d envelopes in %d messages, %v conflicts", total, tc.streamMsgs(), c0+c1)
}

// batchOf finds a message of the log holding several envelopes and
// returns its first seq and count.
func (tc *testCluster) batchOf(topic string) (first, count uint64) {
	tc.t.Helper()
	ctx, cancel := testwait.Context(tc.t, 10*time.Second)
	defer cancel()
	cl := tc.cls[0]
	for seq := uint64(1); ; seq++ {
		m, err := cl.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(logSubject(topic)))
		if err != nil {
			tc.t.Fatalf("no batch message in the log: %v", err)
		}
		f, n, err := msgSeqs(m.Header)
		if err != nil {
			tc.t.Fatal(err)
		}
		if n > 2 {
			return f, n
		}
		seq = m.Sequence
	}
}

// History reads envelopes inside batch messages as it reads single ones:
// pages of any size cross batch boundaries, newest first (before cursors)
// and oldest first (after cursors), resume by seq starts in the middle of
// a batch, id cursors find an envelope inside one, and the directed
// visibility rule applies to each envelope of a batch.
func TestNATS_HistoryPagesAcrossBatches(t *testing.T) {
	tc := startCluster(t, 2, room.Options{RatePerSecond: -1})
	a, _ := tc.nodes[0].Join("room", "a")
	const n = 200
	var all, visible []string // all by seq; what b may see
	for i := range n {
		var e map[string]any
		if i%5 == 4 {
			e = a.Env([]string{"a", "z"}, `{"jsonrpc":"2.0","method":"notifications/secret"}`)
		} else {
			e = a.Env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"%d"}}`, i))
		}
		a.Send(e)
		all = append(all, e["id"].(string))
		if i%5 != 4 {
			visible = append(visible, e["id"].(string))
		}
	}
	// Each echo in order; right after the echo of each envelope to z,
	// its unknown_recipient (z is absent), answers keeping the order of
	// the envelopes.
	for i := range n {
		if m := a.Read(); m.ID != all[i] || m.Seq != uint64(i+1) {
			t.Fatalf("echo %s, want %s seq %d", m, all[i], i+1)
		}
		if i%5 == 4 {
			a.ExpectError(mcpx.CodeUnknownRecipient, all[i])
		}
	}
	first, count := tc.batchOf("room")
	t.Logf("batch of %d at seq %d; %d messages for %d envelopes", count, first, tc.streamMsgs(), n)
	other := tc.nodes[1]
	// Newest first, pages of 7, before cursors, as b: every visible one once.
	var back []string
	q := "?limit=7"
	for {
		page, more := other.HistoryPage("room", "b", q)
		for _, m := range page {
			back = append(back, m.ID)
		}
		if !more {
			break
		}
		q = fmt.Sprintf("?limit=7&before=%d", page[len(page)-1].Seq)
	}
	slices.Reverse(back)
	if !slices.Equal(back, visible) {
		t.Fatalf("b's history backwards: %d envelopes %v\nwant %d %v", len(back), back, len(visible), visible)
	}
	// Oldest first, after cursors, as z (who sees everything addressed to it).
	var fwd []string
	after := uint64(0)
	for {
		page, more := other.HistoryPage("room", "z", fmt.Sprintf("?limit=9&after=%d", after))
		for i := len(page) - 1; i >= 0; i-- {
			fwd = append(fwd, page[i].ID)
		}
		if len(page) == 0 {
			break
		}
		after = page[0].Seq
		if !more {
			break
		}
	}
	if !slices.Equal(fwd, all) {
		t.Fatalf("z's history forwards: %d envelopes, want %d", len(fwd), len(all))
	}
	// Resume from the middle of a batch.
	mid := first + count/2
	page, _ := other.HistoryPage("room", "z", fmt.Sprintf("?limit=3&after=%d", mid))
	if len(page) != 3 || page[2].Seq != mid+1 || page[0].Seq != mid+3 || page[2].ID != all[mid] {
		t.Fatalf("after=%d: %v", mid, gatewaytest.IDs(page))
	}
	page, _ = other.HistoryPage("room", "z", fmt.Sprintf("?limit=2&before=%d", mid))
	if len(page) != 2 || page[0].Seq != mid-1 || page[1].Seq != mid-2 {
		t.Fatalf("before=%d: %v", mid, gatewaytest.IDs(page))
	}
	// An id cursor inside the batch.
	page, _ = other.HistoryPage("room", "z", "?limit=1&after="+all[mid-1])
	if len(page) != 1 || page[0].ID != all[mid] {
		t.Fatalf("after id %s: %v, want %s", all[mid-1], gatewaytest.IDs(page), all[mid])
	}
	if latest, err := tc.cls[1].LatestSeq("room"); err != nil || latest != n {
		t.Fatalf("LatestSeq %d %v, want %d", latest, err, n)
	}
	if topics, err := tc.cls[1].Topics(); err != nil || !slices.Equal(topics, []string{"room"}) {
		t.Fatalf("Topics %v %v", topics, err)
	}
}

// NATS stops while a burst is being appended: every envelope is answered
// (its echo, or unavailable with retry_after_ms, for each envelope of a
// batch that failed), echoes keep rising seqs, and every echoed envelope
// is in the log once NATS is back: nothing echoed that is not stored.
// While NATS is down, the envelopes sent then are answered unavailable at
// once: the answers do not wait for the echoes of envelopes JetStream
// acknowledged but the follower could not reach before NATS stopped (a
// loaded node's follower lags its appends); those echoes come once NATS
// is back.
func TestNATS_BurstWhileNATSStops(t *testing.T) {
	tc := startCluster(t, 2, room.Options{RatePerSecond: -1})
	a, _ := tc.nodes[0].Join("room", "a")
	b, _ := tc.nodes[1].Join("room", "b")
	a.Read() // b's join
	gatewaytest.Barrier(t, a, b)
	sent := burst(a, 150)
	tc.nats.Stop() // with appends in flight and queued
	sent = append(sent, burst(a, 150)...)
	testwait.Eventually(t, 20*time.Second, "the node to see NATS down", func() bool { return !tc.cls[0].Up() })
	sent = append(sent, burst(a, 20)...)
	last := sent[len(sent)-1] // refused at once: the node knows NATS is down
	answered := map[string]bool{}
	var echoed []uint64
	echoIDs := map[uint64]string{}
	read := func(until func() bool) {
		t.Helper()
		for !until() {
			m, err := a.TryRead(30 * time.Second)
			if err != nil {
				t.Fatalf("%d of %d answered: %v", len(answered), len(sent), err)
			}
			switch {
			case m.From == a.ID:
				if n := len(echoed); n > 0 && m.Seq <= echoed[n-1] {
					t.Fatalf("echo seq %d after %d", m.Seq, echoed[n-1])
				}
				echoed = append(echoed, m.Seq)
				echoIDs[m.Seq] = m.ID
				answered[m.ID] = true
			case m.Event() == "error":
				if m.Field("code") != string(mcpx.CodeUnavailable) {
					t.Fatalf("error %s, want unavailable", m)
				}
				if ms, ok := m.Field("retry_after_ms").(float64); !ok || ms <= 0 {
					t.Fatalf("unavailable without retry_after_ms: %s", m)
				}
				answered[m.CorrelationID] = true
			}
		}
	}
	read(func() bool { return answered[last] })
	outage := len(answered)
	tc.nats.Restart()
	read(func() bool { return len(answered) == len(sent) })
	if len(echoed) == len(sent) {
		t.Fatal("nothing failed: NATS stopped too late")
	}
	tc.waitLink(true)
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	page, err := tc.cls[1].Query(ctx, "room", history.Query{Limit: 1000, Before: history.AtSeq(1 << 40)})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uint64]string{}
	for _, r := range page.Records {
		stored[r.Seq] = r.ID
	}
	for _, seq := range echoed {
		if stored[seq] != echoIDs[seq] {
			t.Fatalf("echoed %s with seq %d, history has %q there", echoIDs[seq], seq, stored[seq])
		}
	}
	t.Logf("%d echoed, %d unavailable (%d failed in an append), %d stored; %d answered during the outage", len(echoed), len(sent)-len(echoed), tc.cls[0].stats.appendFailures.Load(), len(page.Records), outage)
}

// An append of a batch fails (a JetStream timeout): every envelope of the
// batch is answered with unavailable, in order, after the echo of the one
// before it; nothing of the batch is stored, and the topic's next
// envelope takes the next seq, gap-free.
func TestNATS_FailedBatchAnswersEveryEnvelope(t *testing.T) {
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	keys := gatewaytest.NewKeys(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	calls := 0
	var real func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	g := tc.addNodeWith(keys, room.Options{RatePerSecond: -1}, ClusterOptions{publishLog: func(ctx context.Context, m *nats.Msg, o ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1: // the first envelope: held until the rest queued behind it
			close(entered)
			<-release
		case 2: // the batch of the rest
			if m.Header.Get(hdrCount) == "" {
				return nil, fmt.Errorf("second append is not a batch: %v", m.Header)
			}
			return nil, fmt.Errorf("stalled: %w", nats.ErrTimeout)
		}
		return real(ctx, m, o...)
	}})
	cl := tc.cls[0]
	real = cl.js.PublishMsg
	a, _ := g.Join("room", "a")
	first := a.Chat("first")["id"].(string)
	<-entered
	const n = 40
	failed := burst(a, n)
	testwait.Eventually(t, 10*time.Second, "the burst to queue", func() bool {
		cl.seqMu.Lock()
		ts := cl.seqs["room"]
		cl.seqMu.Unlock()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(ts.queue) == n+1 // the first is still in it
	})
	close(release)
	// The echo first: the errors, known at once, do not overtake it.
	if m := a.Read(); m.ID != first || m.Seq != 1 {
		t.Fatalf("got %s, want the echo of %s with seq 1", m, first)
	}
	for _, id := range failed {
		m := a.ExpectError(mcpx.CodeUnavailable, id)
		if ms, ok := m.Field("retry_after_ms").(float64); !ok || ms <= 0 {
			t.Fatalf("unavailable without retry_after_ms: %s", m)
		}
	}
	if f := cl.stats.appendFailures.Load(); f != n {
		t.Fatalf("%d append failures counted, want %d", f, n)
	}
	next := a.Chat("next")["id"].(string)
	if m := a.ReadEnvelope(); m.ID != next || m.Seq != 2 {
		t.Fatalf("got %s, want the echo of %s with seq 2", m, next)
	}
}

// A burst batched into few messages, then aged past MaxAge: the trimmer
// purges whole messages but the topic's newest (its next seq is read from
// it), and history serves none of a batch once it is too old; a topic
// with a fresh batch after old ones serves exactly the fresh envelopes.
func TestNATS_HistoryMaxAgeTrimsBatchesWhole(t *testing.T) {
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	const maxAge = 1500 * time.Millisecond
	g := tc.addNodeWith(gatewaytest.NewKeys(t), room.Options{RatePerSecond: -1}, ClusterOptions{MaxAge: maxAge})
	cl := tc.cls[0]
	a, _ := g.Join("quiet", "a")
	b, _ := g.Join("busy", "b")
	const n = 60
	burst(a, n)
	readSeqs(t, a, 1, n)
	burst(b, n)
	readSeqs(t, b, 1, n)
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	subjects := func() map[string]uint64 {
		info, err := cl.stream.Info(ctx, jetstream.WithSubjectFilter(logPrefix+">"))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects
	}
	if c := subjects(); c[logSubject("quiet")] >= n || c[logSubject("busy")] >= n {
		t.Fatalf("not batched: %v", c)
	}
	testwait.Eventually(t, 20*time.Second, "the envelopes to age past MaxAge", func() bool {
		return agedOut(ctx, t, cl, "quiet", "busy")
	})
	fresh := burst(b, n)
	readSeqs(t, b, n+1, n)
	_, lastQuiet, err := cl.last(ctx, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 20*time.Second, "the old batches to be purged", func() bool {
		first, ok, err := cl.nextOf(ctx, "quiet", 1)
		if err != nil || !ok || first.streamSeq != lastQuiet {
			return false
		}
		first, ok, err = cl.nextOf(ctx, "busy", 1)
		return err == nil && ok && first.recs[0].Seq > n
	})
	if seq, err := cl.LatestSeq("quiet"); err != nil || seq != n {
		t.Fatalf("quiet's latest seq %d (%v), want %d: its newest message must stay", seq, err, n)
	}
	if page, err := cl.Query(ctx, "quiet", history.Query{Limit: 1000}); err != nil || len(page.Records) != 0 {
		t.Fatalf("quiet's history: %d records (%v), want none: all are older than MaxAge", len(page.Records), err)
	}
	page, err := cl.Query(ctx, "busy", history.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page.Records {
		got = append(got, r.ID)
	}
	slices.Reverse(got)
	if !slices.Equal(got, fresh) {
		t.Fatalf("busy's history: %d records, want the %d fresh ones", len(got), len(fresh))
	}
	e := a.Chat("back")
	if m := a.ReadEnvelope(); m.ID != e["id"] || m.Seq != n+1 {
		t.Fatalf("quiet's next envelope %s, want seq %d", m, n+1)
	}
}

// --history-max limits a topic's messages (MaxMsgsPerSubject), and a
// message may hold a batch: history still serves only the newest
// MaxPerTopic envelopes, as one node does.
func TestNATS_HistoryMaxCountsEnvelopesNotMessages(t *testing.T) {
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	const keep = 5
	g := tc.addNodeWith(gatewaytest.NewKeys(t), room.Options{RatePerSecond: -1}, ClusterOptions{MaxPerTopic: keep})
	a, _ := g.Join("room", "a")
	const n = 100
	sent := burst(a, n)
	readSeqs(t, a, 1, n)
	if msgs := tc.streamMsgs(); msgs > keep {
		t.Fatalf("%d messages kept, want at most %d", msgs, keep)
	}
	page, more := g.HistoryPage("room", "a", "?limit=100")
	if got := gatewaytest.IDs(page); more || !slices.Equal(got, []string{sent[99], sent[98], sent[97], sent[96], sent[95]}) {
		t.Fatalf("newest page %v more=%v, want the last %d", got, more, keep)
	}
	page, more = g.HistoryPage("room", "a", "?limit=100&after=10")
	if got := gatewaytest.IDs(page); more || len(got) != keep || got[keep-1] != sent[n-keep] {
		t.Fatalf("after=10: %v more=%v, want the last %d", got, more, keep)
	}
}

// stalledLogCluster is one node whose first append to the log waits for
// release; queued reports the ids waiting for the topic's appender.
func stalledLogCluster(t *testing.T, opts room.Options) (g *gatewaytest.Gateway, release func(), queued func(topic string) []string) {
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	entered, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var real func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	first := true
	var mu sync.Mutex
	g = tc.addNodeWith(gatewaytest.NewKeys(t), opts, ClusterOptions{publishLog: func(ctx context.Context, m *nats.Msg, o ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		mu.Lock()
		wait := first
		first = false
		mu.Unlock()
		if wait {
			close(entered)
			<-rel
		}
		return real(ctx, m, o...)
	}})
	cl := tc.cls[0]
	real = cl.js.PublishMsg
	t.Cleanup(func() { once.Do(func() { close(rel) }) })
	queued = func(topic string) []string {
		cl.seqMu.Lock()
		ts := cl.seqs[topic]
		cl.seqMu.Unlock()
		if ts == nil {
			return nil
		}
		ts.mu.Lock()
		defer ts.mu.Unlock()
		var out []string
		for _, r := range ts.queue {
			out = append(out, r.ID)
		}
		return out
	}
	return g, func() { <-entered; once.Do(func() { close(rel) }) }, queued
}

// The bounds a publisher's read loop waits for (the label of
// cvm_mcpx_publisher_waits_total).
const (
	boundCount = "count"
	boundBytes = "bytes"
)

// publisherWaits is how often g's read loops waited for bound.
func publisherWaits(g *gatewaytest.Gateway, bound string) float64 {
	v, _ := g.Metric(`cvm_mcpx_publisher_waits_total{bound="` + bound + `"}`)
	return v
}

// A connection's envelopes on their way to JetStream are bounded, in
// count (MaxUncommitted) and in bytes (4 MiB): its next frame is read only
// once one is acknowledged, so it cannot fill its topic's queue, and
// another connection's envelope goes ahead of it. Large envelopes hold
// the read loop sooner, and batches of them are cut at the NATS max
// payload.
func TestNATS_InFlightEnvelopesAreBoundedPerConnection(t *testing.T) {
	for _, tc := range []struct {
		bound   string // boundCount or boundBytes
		opts    room.Options
		payload string
		n, fit  int // alice sends n envelopes, of which fit go before bob's
	}{
		{boundCount, room.Options{RatePerSecond: -1, MaxUncommitted: 3}, `{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"burst"}}`, 4, 3},
		{boundBytes, room.Options{RatePerSecond: -1}, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/x","params":{"blob":%q}}`, bytes.Repeat([]byte("x"), 900<<10)), 6, 4},
	} {
		t.Run(tc.bound, func(t *testing.T) {
			g, release, queued := stalledLogCluster(t, tc.opts)
			a, _ := g.Join("room", "a")
			b, _ := g.Join("room", "b")
			c, _ := g.Join("room", "c")
			var sent []string
			for range tc.n {
				e := a.Env(nil, tc.payload)
				a.Send(e)
				sent = append(sent, e["id"].(string))
			}
			testwait.Eventually(t, 10*time.Second, "alice's envelopes to queue", func() bool { return len(queued("room")) == tc.fit })
			bobs := b.Chat("bob")["id"].(string)
			want := append(slices.Clone(sent[:tc.fit]), bobs)
			testwait.Eventually(t, 10*time.Second, "bob's envelope to queue", func() bool { return len(queued("room")) >= tc.fit+1 })
			testwait.Eventually(t, 10*time.Second, "alice's next to wait for room", func() bool { return publisherWaits(g, tc.bound) == 1 })
			if got := queued("room"); !slices.Equal(got, want) {
				t.Fatalf("queued %v, want %v: alice's next waits for room", got, want)
			}
			release()
			for i, id := range append(want, sent[tc.fit:]...) {
				m := c.ReadEnvelope()
				if m.ID != id || m.Seq != uint64(i+1) {
					t.Fatalf("carol got %s, want %s with seq %d", m, id, i+1)
				}
			}
		})
	}
}
