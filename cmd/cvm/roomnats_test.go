package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
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
	var urls []string
	for range 2 {
		p := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data, "--nats", ns.URL())
		var ready struct {
			roomReady
			NATS string `json:"nats"`
			Node string `json:"node"`
		}
		p.readyLine(t, &ready)
		if ready.NATS != ns.URL() || ready.Node == "" {
			t.Fatalf("ready line %+v", ready)
		}
		urls = append(urls, ready.URL)
		t.Cleanup(func() { p.stop(t, syscall.SIGTERM) })
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.Write(ctx, websocket.MessageText, []byte(send))
	for _, conn := range []*websocket.Conn{a, b} {
		if m := roomRead(t, conn); m["id"] != "c1" || m["seq"] != 1.0 {
			t.Fatalf("got %v, want c1 with seq 1", m)
		}
	}
}

func jsonDecode(resp *http.Response, v any) {
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(v)
}
