package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
)

func TestRoomNATS_UnreachableAtStartIsExit2(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	c := newCLI(t)
	code, _, errOut := c.run("room", "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--nats", url)
	if code != 2 || !strings.Contains(errOut, "--nats") || !strings.Contains(errOut, "unreachable") {
		t.Fatalf("exit %d, stderr %q; want 2 and a clear error about --nats", code, errOut)
	}
}

// Two cvm room serve --nats processes share one --data (the signing keys)
// and one NATS: a token minted once works on both, and a chat sent on one
// reaches a participant on the other, with its seq.
func TestRoomNATS_TwoProcessesShareARoom(t *testing.T) {
	ns := natstest.Start(t)
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	var urls, rests []string
	var procs []*proc
	for range 2 {
		p := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data, "--nats", ns.URL())
		var ready struct {
			roomReady
			NATS string `json:"nats"`
			Node string `json:"node"`
		}
		p.ReadyLine(t, &ready)
		if ready.NATS != ns.URL() || ready.Node == "" {
			t.Fatalf("ready line %+v", ready)
		}
		urls = append(urls, ready.URL)
		rests = append(rests, ready.REST)
		procs = append(procs, p)
		t.Cleanup(func() { p.Stop(t, syscall.SIGTERM) })
		resp, err := http.Get(ready.REST + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		var health map[string]any
		jsonDecode(resp, &health)
		if resp.StatusCode != 200 || health["nats"] != "up" || health["node"] != ready.Node {
			t.Fatalf("healthz %d %v", resp.StatusCode, health)
		}
	}
	ta := mint(t, c, "--data", data, "--topic", "room:x", "--id", "alice")
	tb := mint(t, c, "--data", data, "--topic", "room:x", "--id", "bob")
	a := roomDial(t, urls[0], "room:x", ta)
	roomRead(t, a) // welcome
	b := roomDial(t, urls[1], "room:x", tb)
	roomRead(t, b) // welcome
	if m := roomRead(t, a); m["kind"] != "presence" {
		t.Fatalf("alice got %v, want bob's join", m)
	}
	send := `{"protocol":"mcp-x/v0","id":"c1","ts":"2025-08-17T14:05:00Z","from":"alice","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"hi"}}}`
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	a.Write(ctx, websocket.MessageText, []byte(send))
	for _, conn := range []*websocket.Conn{a, b} {
		if m := roomRead(t, conn); m["id"] != "c1" || m["seq"] != 1.0 {
			t.Fatalf("got %v, want c1 with seq 1", m)
		}
	}
	// /metrics has the cluster figures: the first node appended c1.
	resp, err := http.Get(rests[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{"cvm_mcpx_nats_up 1", "cvm_mcpx_cluster_appends_total 1", "cvm_mcpx_cluster_append_conflicts_total 0", "cvm_mcpx_cluster_dead_node_leaves_total 0"} {
		if !slices.Contains(strings.Split(string(body), "\n"), line) {
			t.Errorf("/metrics of node 1 lacks %q", line)
		}
	}
	if !strings.Contains(string(body), "cvm_mcpx_cluster_roster_writes_total ") {
		t.Error("/metrics of node 1 lacks cvm_mcpx_cluster_roster_writes_total")
	}
	// Stopping a node is no lost NATS link: it says nothing about one.
	if code := procs[0].Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM; stderr: %s", code, procs[0].Stderr)
	}
	if strings.Contains(procs[0].Stderr.String(), "NATS link lost") {
		t.Errorf("a stopped node warns of a lost NATS link: %s", procs[0].Stderr)
	}
}

func jsonDecode(resp *http.Response, v any) {
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(v)
}

// A cluster of three cvm room serve --nats processes; a bridge (in front of
// server-everything) and a chat given all of them (--gateway repeated, and
// comma-separated) join through the first, another chat through the third.
// The first node is killed with SIGKILL: the bridge and the chat move to
// another node and resume there by seq. A chat sent while they were away
// reaches the moved chat exactly once, and a call to the moved bridge from
// the third node is answered.
func TestRoomNATS_BridgeAndChatMoveToAnotherNode(t *testing.T) {
	node, everything := serverEverything(t)
	ns := natstest.Start(t)
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	var nodes []*proc
	var urls []string
	for range 3 {
		p := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data, "--nats", ns.URL())
		var ready roomReady
		p.ReadyLine(t, &ready)
		nodes, urls = append(nodes, p), append(urls, ready.REST)
		t.Cleanup(func() { p.Stop(t, syscall.SIGTERM) })
	}
	tok := func(id string) string { return mint(t, c, "--data", data, "--topic", "room:x", "--id", id) }

	bridge := startCVM(t, c, "room", "bridge", "--gateway", urls[0], "--gateway", urls[1], "--gateway", urls[2],
		"--topic", "room:x", "--token", tok("alpha"), "--", node, everything, "stdio")
	var bready struct {
		Ready bool `json:"ready"`
	}
	bridge.ReadyLine(t, &bready)
	t.Cleanup(func() { bridge.Stop(t, syscall.SIGTERM) })
	alice := startPiped(t, c, "--json", "room", "chat", "--gateway", urls[0]+","+urls[1], "--topic", "room:x", "--token", tok("alice"))
	alice.expectJSON(t, "ready", nil)
	bob := startPiped(t, c, "--json", "room", "chat", "--gateway", urls[2], "--topic", "room:x", "--token", tok("bob"))
	bob.expectJSON(t, "ready", nil)
	alice.expectJSON(t, "join", func(m map[string]any) bool { return m["participant"].(map[string]any)["id"] == "bob" })

	bob.say(t, "before")
	alice.expectJSON(t, "chat", func(m map[string]any) bool { return m["text"] == "before" })
	bob.say(t, `/call alpha echo {"message": "one"}`)
	if r := bob.expectJSON(t, "result", nil); !strings.Contains(string(mustJSON(t, r["result"])), "Echo: one") {
		t.Fatalf("call before the kill: %v", r)
	}

	nodes[0].Kill() // SIGKILL; gone: nothing more is delivered through it
	bob.say(t, "while away")
	alice.expectJSON(t, "reconnected", nil)
	// Alpha's new connection replaced the one the dead node held.
	bob.expectJSON(t, "join", func(m map[string]any) bool { return m["participant"].(map[string]any)["id"] == "alpha" })
	bob.say(t, `/call alpha echo {"message": "two"}`)
	if r := bob.expectJSON(t, "result", nil); !strings.Contains(string(mustJSON(t, r["result"])), "Echo: two") {
		t.Fatalf("call after the kill: %v", r)
	}
	alice.say(t, "after")
	bob.expectJSON(t, "chat", func(m map[string]any) bool { return m["text"] == "after" })

	// Alice's chats up to her own "after": "while away" exactly once, and
	// seqs rising.
	var texts []string
	var last float64
	for {
		m := alice.expectJSON(t, "chat", nil)
		seq, _ := m["seq"].(float64)
		if seq <= last {
			t.Fatalf("seq %v after %v (%v)", seq, last, texts)
		}
		last = seq
		texts = append(texts, m["text"].(string))
		if m["text"] == "after" {
			break
		}
	}
	if !slices.Equal(texts, []string{"while away", "after"}) {
		t.Fatalf("alice's chats after the kill: %q, want each once", texts)
	}

	// A call in flight while the bridge's node (now the second) stops with
	// SIGTERM: the bridge moves to the third node, and the call is
	// answered there, not failed because the stopping node let it go.
	bob.say(t, `/call alpha trigger-long-running-operation {"duration": 2, "steps": 2}`)
	nodes[1].Stop(t, syscall.SIGTERM)
	if r := bob.expectJSON(t, "result", nil); !strings.Contains(string(mustJSON(t, r["result"])), "Long running operation completed") {
		t.Fatalf("call in flight across the bridge's move: %v", r)
	}
}
