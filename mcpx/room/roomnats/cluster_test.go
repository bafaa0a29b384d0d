package roomnats

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

// testCluster is several gateway nodes sharing one embedded JetStream
// server (sync always), with one set of keys.
type testCluster struct {
	t     *testing.T
	nats  *natstest.Server
	nodes []*gatewaytest.Gateway
	conns []*natsx.Conn
	cls   []*Cluster
}

func startCluster(t *testing.T, n int, opts room.Options) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	keys := gatewaytest.NewKeys(t)
	for i := 0; i < n; i++ {
		tc.addNode(keys, opts)
	}
	return tc
}

func (tc *testCluster) addNode(keys *room.Keys, opts room.Options) *gatewaytest.Gateway {
	tc.t.Helper()
	return tc.addNodeWith(keys, opts, ClusterOptions{})
}

// addNodeWith adds a node whose Cluster has copts (the test timeouts and
// logger are set here).
func (tc *testCluster) addNodeWith(keys *room.Keys, opts room.Options, copts ClusterOptions) *gatewaytest.Gateway {
	t := tc.t
	t.Helper()
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := natsx.Connect(ctx, tc.nats.URL(), natsx.Options{Logger: log, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	copts.NodeTimeout, copts.RetryAfter, copts.Logger = 2*time.Second, 250*time.Millisecond, log
	cl, err := NewCluster(ctx, conn, copts)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	opts.Tokens, opts.Backend = keys, cl
	g := gatewaytest.Start(t, opts)
	// Cleanups run last-in first-out: the gateway closes first.
	t.Cleanup(func() { cl.Close(); conn.Close() })
	tc.nodes = append(tc.nodes, g)
	tc.conns = append(tc.conns, conn)
	tc.cls = append(tc.cls, cl)
	return g
}

// waitRoster waits until every node sees exactly ids in topic.
func (tc *testCluster) waitRoster(topic string, ids ...string) {
	tc.t.Helper()
	for _, c := range tc.cls {
		testwait.Eventually(tc.t, 20*time.Second, "the roster of "+topic, func() bool {
			ms := c.members(topic)
			if len(ms) != len(ids) {
				return false
			}
			for _, id := range ids {
				if _, ok := ms[id]; !ok {
					return false
				}
			}
			return true
		})
	}
}

func TestNATS_BroadcastAndDirectedCallAcrossNodes(t *testing.T) {
	tc := startCluster(t, 3, room.Options{})
	n := tc.nodes
	a, _ := n[0].Join("room", "a")
	b, _ := n[1].Join("room", "b")
	if m := a.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "b" {
		t.Fatalf("a got %s, want b's join", m)
	}
	c, w := n[2].Join("room", "c")
	var welcome mcpx.Welcome
	if err := jsonUnmarshal(w.Payload, &welcome); err != nil || len(welcome.Participants) != 2 ||
		welcome.Participants[0].ID != "a" || welcome.Participants[1].ID != "b" {
		t.Fatalf("c's welcome %s: want participants a and b, on other nodes", w)
	}
	for _, x := range []*gatewaytest.Client{a, b} {
		if m := x.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "c" {
			t.Fatalf("%s got %s, want c's join", x.ID, m)
		}
	}
	// A broadcast reaches each participant on each node once, the sender's
	// echo with its seq.
	e := a.Chat("hello")
	for _, x := range []*gatewaytest.Client{a, b, c} {
		m := x.Read()
		if m.ID != e["id"] || m.Seq != 1 {
			t.Fatalf("%s got %s, want %s with seq 1", x.ID, m, e["id"])
		}
	}
	// A directed request reaches only its recipient on another node; the
	// answer comes back across nodes.
	req := a.Env([]string{"c"}, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	a.Send(req)
	m := c.Read()
	if m.ID != req["id"] || m.Seq != 2 || m.From != "a" {
		t.Fatalf("c got %s, want the request with seq 2", m)
	}
	resp := c.Env([]string{"a"}, `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`)
	resp["correlation_id"] = req["id"]
	c.Send(resp)
	if m := a.Read(); m.ID != resp["id"] || m.CorrelationID != req["id"] || m.Seq != 3 {
		t.Fatalf("a got %s, want the response with seq 3", m)
	}
	// b saw neither: the next thing it reads is a broadcast with seq 4.
	gatewaytest.Barrier(t, b, a, c)
	// An absent recipient is reported, cluster-wide.
	x := b.Env([]string{"nobody", "a"}, `{"jsonrpc":"2.0","method":"notifications/x"}`)
	b.Send(x)
	b.ExpectError(mcpx.CodeUnknownRecipient, x["id"].(string))
	if m := a.Read(); m.ID != x["id"] {
		t.Fatalf("a got %s, want %s", m, x["id"])
	}
}

func TestNATS_HistoryAndResumeThroughAnotherNode(t *testing.T) {
	tc := startCluster(t, 2, room.Options{})
	a, _ := tc.nodes[0].Join("room", "a")
	var sent []string
	for i := 0; i < 7; i++ {
		e := a.Chat("m")
		if m := a.Read(); m.ID != e["id"] || m.Seq != uint64(i+1) {
			t.Fatalf("echo %s, want %s seq %d", m, e["id"], i+1)
		}
		sent = append(sent, e["id"].(string))
	}
	d := a.Env([]string{"z"}, `{"jsonrpc":"2.0","method":"notifications/secret"}`)
	a.Send(d)
	a.ExpectError(mcpx.CodeUnknownRecipient, d["id"].(string))
	other := tc.nodes[1]
	// Resume by seq through the other node: everything after 3, oldest last.
	page, more := other.HistoryPage("room", "b", "?after=3&limit=3")
	if got := gatewaytest.IDs(page); len(got) != 3 || got[0] != sent[5] || got[2] != sent[3] || !more {
		t.Fatalf("after=3: %v more=%v, want %v..%v and more", got, more, sent[5], sent[3])
	}
	// b may not see a's directed envelope to z: the newest page skips it.
	page, more = other.HistoryPage("room", "b", "?limit=2")
	if got := gatewaytest.IDs(page); len(got) != 2 || got[0] != sent[6] || got[1] != sent[5] || !more {
		t.Fatalf("newest: %v more=%v", got, more)
	}
	page, _ = other.HistoryPage("room", "z", "?limit=1")
	if got := gatewaytest.IDs(page); len(got) != 1 || got[0] != d["id"] {
		t.Fatalf("z's newest: %v, want %s", got, d["id"])
	}
	page, more = other.HistoryPage("room", "b", "?before=3")
	if got := gatewaytest.IDs(page); len(got) != 2 || got[0] != sent[1] || more {
		t.Fatalf("before=3: %v more=%v", got, more)
	}
	page, _ = other.HistoryPage("room", "b", "?after="+sent[4])
	if got := gatewaytest.IDs(page); len(got) != 2 || got[0] != sent[6] || got[1] != sent[5] {
		t.Fatalf("after id: %v", got)
	}
	// A joiner on the other node gets latest_seq and, live, only what follows.
	b, w := other.Join("room", "b")
	var welcome mcpx.Welcome
	jsonUnmarshal(w.Payload, &welcome)
	if welcome.History.LatestSeq != 8 || !welcome.History.Enabled {
		t.Fatalf("welcome %s: want latest_seq 8", w)
	}
	a.Read() // b's join
	e := a.Chat("after")
	if m := b.Read(); m.ID != e["id"] || m.Seq != 9 {
		t.Fatalf("b got %s, want seq 9", m)
	}
	var topics struct{ Topics []string }
	other.Get("/v0/topics", other.Token("room", "b"), &topics)
	if len(topics.Topics) != 1 || topics.Topics[0] != "room" {
		t.Fatalf("topics %v", topics.Topics)
	}
}

func TestNATS_DuplicateIDAcrossNodesNewerWins(t *testing.T) {
	tc := startCluster(t, 3, room.Options{})
	w, _ := tc.nodes[2].Join("room", "watcher")
	old, _ := tc.nodes[0].Join("room", "x")
	if m := w.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "x" {
		t.Fatalf("watcher got %s", m)
	}
	tc.waitRoster("room", "watcher", "x")
	newer, _ := tc.nodes[1].Join("room", "x")
	if m := w.Read(); m.Event() != mcpx.PresenceLeave || m.PresenceID() != "x" || m.Field("reason") != string(mcpx.LeaveReplaced) {
		t.Fatalf("watcher got %s, want x's leave (replaced)", m)
	}
	if m := w.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "x" {
		t.Fatalf("watcher got %s, want x's join", m)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	for {
		_, _, err := old.Conn.Read(ctx)
		if err == nil {
			continue
		}
		if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			t.Fatalf("old connection ended with %v, want 1000 Duplicate connection", err)
		}
		break
	}
	gatewaytest.Barrier(t, newer, w)
	tc.waitRoster("room", "watcher", "x")
	if ms := tc.cls[0].members("room"); ms["x"].Node != tc.cls[1].Node() {
		t.Fatalf("x is on %s, want the newer connection's node %s", ms["x"].Node, tc.cls[1].Node())
	}
}

func TestNATS_MaxParticipantsIsClusterWide(t *testing.T) {
	tc := startCluster(t, 3, room.Options{MaxParticipants: 2})
	tc.nodes[0].Join("room", "a")
	tc.nodes[1].Join("room", "b")
	code, body := tc.nodes[2].DialStatus("?topic=room", http.Header{"Authorization": {"Bearer " + tc.nodes[2].Token("room", "c")}})
	if code != http.StatusForbidden || body["code"] != string(mcpx.CodeTopicFull) {
		t.Fatalf("third participant: %d %v, want 403 topic_full", code, body)
	}
	var parts struct{ Participants []mcpx.Participant }
	tc.nodes[2].Get("/v0/topics/room/participants", tc.nodes[2].Token("room", "c"), &parts)
	if len(parts.Participants) != 2 {
		t.Fatalf("participants seen from the third node: %v", parts.Participants)
	}
}

func TestNATS_DeadNodesParticipantsAreReportedLeft(t *testing.T) {
	tc := startCluster(t, 2, room.Options{})
	w, _ := tc.nodes[0].Join("room", "w")
	tc.nodes[1].Join("room", "doomed")
	if m := w.Read(); m.PresenceID() != "doomed" {
		t.Fatalf("w got %s", m)
	}
	// The node loses NATS for good without a word: as if it were killed.
	tc.cls[1].Close()
	tc.conns[1].Close()
	start := time.Now()
	m, err := w.TryRead(30 * time.Second)
	if err != nil || m.Event() != mcpx.PresenceLeave || m.PresenceID() != "doomed" || m.Field("reason") != string(mcpx.LeaveTimeout) {
		t.Fatalf("w got %v %v, want doomed's leave (timeout)", m, err)
	}
	// NodeTimeout is 2 s here; the bound is NodeTimeout plus a sweep.
	if d := time.Since(start); d > testwait.Timeout(10*time.Second) {
		t.Fatalf("leave after %v", d)
	}
	testwait.Eventually(t, 10*time.Second, "the roster without doomed", func() bool { _, ok := tc.cls[0].members("room")["doomed"]; return !ok })
	if v, _ := tc.nodes[0].Metric("cvm_mcpx_cluster_dead_node_leaves_total"); v != 1 {
		t.Fatalf("node 0 reported %v leaves of dead nodes' participants, want 1", v)
	}
}

func TestNATS_StoppedAndRestarted(t *testing.T) {
	tc := startCluster(t, 2, room.Options{})
	a, _ := tc.nodes[0].Join("room", "a")
	b, _ := tc.nodes[1].Join("room", "b")
	a.Read() // b's join
	gatewaytest.Barrier(t, a, b)
	tc.nats.Stop()
	testwait.Eventually(t, 20*time.Second, "the node to see NATS down", func() bool { return !tc.cls[0].Up() })
	var health map[string]any
	if code, _ := tc.nodes[0].Get("/healthz", "", &health); code != http.StatusServiceUnavailable || health["nats"] != "down" {
		t.Fatalf("healthz while NATS is down: %d %v", code, health)
	}
	if v, ok := tc.nodes[0].Metric("cvm_mcpx_nats_up"); !ok || v != 0 {
		t.Fatalf("cvm_mcpx_nats_up while NATS is down: %v (served: %v)", v, ok)
	}
	e := a.Chat("lost?")
	m := a.ExpectError(mcpx.CodeUnavailable, e["id"].(string))
	if ms, ok := m.Field("retry_after_ms").(float64); !ok || ms <= 0 {
		t.Fatalf("unavailable without retry_after_ms: %s", m)
	}
	tc.nats.Restart()
	for i := range tc.cls {
		testwait.Eventually(t, 30*time.Second, "the node to see NATS up", func() bool { return tc.cls[i].Up() })
	}
	if code, _ := tc.nodes[0].Get("/healthz", "", &health); code != http.StatusOK || health["nats"] != "up" {
		t.Fatalf("healthz after NATS returned: %d %v", code, health)
	}
	if v, _ := tc.nodes[0].Metric("cvm_mcpx_nats_up"); v != 1 {
		t.Fatalf("cvm_mcpx_nats_up after NATS returned: %v", v)
	}
	// The connections stayed; the log goes on where it was, across nodes.
	e = a.Chat("back")
	for _, x := range []*gatewaytest.Client{a, b} {
		m, err := x.TryRead(30 * time.Second)
		if err != nil || m.ID != e["id"] || m.Seq != 2 {
			t.Fatalf("%s got %v %v, want %s with seq 2", x.ID, m, err, e["id"])
		}
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// The cluster figures of /metrics count what the node did through NATS:
// its appends, an append refused because another node had taken the seq
// (and retried), its roster writes, and the link's state.
func TestNATS_MetricsShowClusterFigures(t *testing.T) {
	tc := startCluster(t, 2, room.Options{})
	n0, n1 := tc.nodes[0], tc.nodes[1]
	for _, name := range []string{"cvm_mcpx_cluster_appends_total", "cvm_mcpx_cluster_append_conflicts_total", "cvm_mcpx_cluster_dead_node_leaves_total"} {
		if v, ok := n0.Metric(name); !ok || v != 0 {
			t.Fatalf("%s before any traffic: %v (served: %v), want 0", name, v, ok)
		}
	}
	a, _ := n0.Join("room", "a")
	b, _ := n1.Join("room", "b")
	a.Read() // b's join
	// a appends on node 0, b on node 1, then a again: node 0's view of the
	// topic's end is stale, JetStream refuses the first try, node 0 retries.
	for i, from := range []*gatewaytest.Client{a, b, a} {
		e := from.Chat("x")
		for _, x := range []*gatewaytest.Client{a, b} {
			if m := x.Read(); m.ID != e["id"] || m.Seq != uint64(i+1) {
				t.Fatalf("%s got %s, want %s with seq %d", x.ID, m, e["id"], i+1)
			}
		}
	}
	want := map[string]func(float64) bool{
		"cvm_mcpx_nats_up":                        func(v float64) bool { return v == 1 },
		"cvm_mcpx_cluster_appends_total":          func(v float64) bool { return v == 2 },
		"cvm_mcpx_cluster_append_conflicts_total": func(v float64) bool { return v >= 1 },
		"cvm_mcpx_cluster_append_failures_total":  func(v float64) bool { return v == 0 },
		"cvm_mcpx_cluster_roster_writes_total":    func(v float64) bool { return v >= 1 },
		"cvm_mcpx_cluster_roster_conflicts_total": func(float64) bool { return true }, // served; none needed here
		"cvm_mcpx_cluster_dead_node_leaves_total": func(v float64) bool { return v == 0 },
	}
	for name, okv := range want {
		if v, ok := n0.Metric(name); !ok || !okv(v) {
			t.Errorf("node 0: %s = %v (served: %v)", name, v, ok)
		}
	}
	if v, _ := n1.Metric("cvm_mcpx_cluster_appends_total"); v != 1 {
		t.Errorf("node 1: appends %v, want 1", v)
	}
	// A gateway without a cluster serves none of them.
	if _, ok := gatewaytest.Start(t, room.Options{}).Metric("cvm_mcpx_nats_up"); ok {
		t.Error("a single node serves cvm_mcpx_nats_up")
	}
}

// A gateway that stops while its Cluster lives on does not report its
// participants left: they are moving. One that connects again elsewhere
// replaces its entry (the others see leave "replaced", then join); one
// that does not come back is reported left ("timeout") after NodeTimeout.
func TestNATS_StoppedGatewaysParticipantsMoveOrTimeOut(t *testing.T) {
	tc := startCluster(t, 2, room.Options{})
	n0, n1 := tc.nodes[0], tc.nodes[1]
	bob, _ := n1.Join("room", "bob")
	n0.Join("room", "alice")
	if m := bob.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "alice" {
		t.Fatalf("bob got %s, want alice's join", m)
	}
	n0.Join("room", "carol")
	if m := bob.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "carol" {
		t.Fatalf("bob got %s, want carol's join", m)
	}
	n0.Stop()
	n1.Join("room", "carol") // carol moves at once; alice never comes back
	if m := bob.Read(); m.Event() != mcpx.PresenceLeave || m.PresenceID() != "carol" || m.Field("reason") != string(mcpx.LeaveReplaced) {
		t.Fatalf("bob got %s, want carol's old connection replaced", m)
	}
	if m := bob.Read(); m.Event() != mcpx.PresenceJoin || m.PresenceID() != "carol" {
		t.Fatalf("bob got %s, want carol's join", m)
	}
	if m := bob.Read(); m.Event() != mcpx.PresenceLeave || m.PresenceID() != "alice" || m.Field("reason") != string(mcpx.LeaveTimeout) {
		t.Fatalf("bob got %s, want alice's leave (timeout): she did not come back", m)
	}
	tc.waitRoster("room", "bob", "carol")
}

// waitLink waits until every node sees the link to NATS up (or down).
func (tc *testCluster) waitLink(up bool) {
	tc.t.Helper()
	for i := range tc.cls {
		testwait.Eventually(tc.t, 30*time.Second, "the node to see the NATS link change", func() bool { return tc.cls[i].Up() == up })
	}
}
