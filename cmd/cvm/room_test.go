package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/room"
)

type roomReady struct {
	Ready   bool   `json:"ready"`
	URL     string `json:"url"`
	REST    string `json:"rest"`
	Metrics string `json:"metrics"`
	Data    string `json:"data"`
	Compat  string `json:"compat"`
}

// startRoomGateway runs cvm room serve on a free port with a data
// directory of its own, which it returns with the ready line.
func startRoomGateway(t *testing.T, c *cli) (data string, ready roomReady) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "room")
	startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data).ReadyLine(t, &ready)
	return data, ready
}

// mint runs "cvm room token" in-process and returns the token.
func mint(t *testing.T, c *cli, args ...string) string {
	t.Helper()
	code, out, errOut := c.run(append([]string{"room", "token"}, args...)...)
	if code != 0 {
		t.Fatalf("room token %v: %d %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 1 || strings.Count(lines[0], ".") != 2 {
		t.Fatalf("room token printed %q, want exactly one token line", out)
	}
	return lines[0]
}

func roomDial(t *testing.T, url, topic, token string) *websocket.Conn {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url+"?topic="+topic, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		t.Fatalf("dial %s: %v", topic, err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

func roomRead(t *testing.T, conn *websocket.Conn) map[string]any {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	_, data, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

func TestRoomCommand_ServeMintWhileRunningAndSignal(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	p := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	p.ReadyLine(t, &ready)
	if !ready.Ready || !strings.HasPrefix(ready.URL, "ws://127.0.0.1:") || !strings.HasSuffix(ready.URL, "/v0/ws") ||
		ready.Data != data || ready.Compat != "spec" {
		t.Fatalf("ready line %+v", ready)
	}
	// Minted by another process while the gateway runs.
	tok := mint(t, c, "--data", data, "--topic", "room:alpha", "--id", "robot-alpha", "--name", "Robot Alpha", "--kind", "robot", "--ttl", "1h")
	conn := roomDial(t, ready.URL, "room:alpha", tok)
	w := roomRead(t, conn)
	payload, _ := w["payload"].(map[string]any)
	participant, _ := payload["participant"].(map[string]any)
	if payload["event"] != "welcome" || participant["name"] != "Robot Alpha" || participant["kind"] != "robot" {
		t.Fatalf("welcome %v", w)
	}
	for _, name := range []string{room.EdKeyFile, room.HSKeyFile} {
		info, err := os.Stat(filepath.Join(data, name))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", name, err, info)
		}
	}
	send := `{"protocol":"mcp-x/v0","id":"env-chat-1","ts":"2025-08-17T14:05:00Z","from":"robot-alpha","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"Hello everyone!"}}}`
	conn.Write(context.Background(), websocket.MessageText, []byte(send))
	if echo := roomRead(t, conn); echo["id"] != "env-chat-1" || echo["seq"] != 1.0 {
		t.Fatalf("echo %v", echo)
	}

	code := p.Stop(t, syscall.SIGTERM)
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, p.Stderr)
	}
	if rest, _ := io.ReadAll(p.Stdout); len(rest) != 0 {
		t.Errorf("stdout after the ready line: %q", rest)
	}
	ctx, cancel := testwait.Context(t, 5*time.Second)
	defer cancel()
	if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("connection at shutdown: %v, want close 1001", err)
	}

	// History survives the restart; the old token still works (same key).
	p = startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	p.ReadyLine(t, &ready)
	req, _ := http.NewRequest("GET", ready.REST+"/v0/topics/room:alpha/history", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ History []map[string]any }
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || len(body.History) != 1 || body.History[0]["id"] != "env-chat-1" {
		t.Fatalf("history after restart: %d %v", resp.StatusCode, body.History)
	}
}

func TestRoomToken_UsageErrors(t *testing.T) {
	c := newCLI(t)
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"--data", data, "--id", "a"}, "--topic and --id are required"},
		{[]string{"--data", data, "--topic", "room:x", "--id", "a", "--kind", "cat"}, "human, agent or robot"},
		{[]string{"--data", data, "--topic", "room:x", "--id", "system:gateway"}, "reserved"},
		{[]string{"--data", data, "--topic", "a/b", "--id", "a"}, "--topic"},
		{[]string{"--data", data, "--topic", "room:x", "--id", "a", "--ttl", "-1h"}, "positive"},
		{[]string{"--data", data, "--topic", "room:x", "--id", "a", "--alg", "none"}, "EdDSA or HS256"},
	} {
		code, out, errOut := c.run(append([]string{"room", "token"}, tc.args...)...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, tc.hint) {
			t.Errorf("%v: code %d stdout %q stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.hint)
		}
	}
	// HS256 tokens and several topics per token.
	tok := mint(t, c, "--data", data, "--topic", "room:x", "--topic", "room:y", "--id", "a", "--alg", "HS256")
	keys, err := room.LoadOrCreateKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := keys.Verify(tok, time.Now())
	if err != nil || !claims.Allows("room:x") || !claims.Allows("room:y") || claims.Subject != "a" {
		t.Fatalf("claims %+v %v", claims, err)
	}
}

func TestRoomServe_UsageErrors(t *testing.T) {
	c := newCLI(t)
	data := t.TempDir()
	code, out, errOut := c.run("room", "serve", "--listen", "127.0.0.1:0", "--data", data, "--compat", "bogus")
	if code != exitLocal || out != "" || !strings.Contains(errOut, `want "spec" or "reference"`) {
		t.Fatalf("--compat bogus: code %d stdout %q stderr %q", code, out, errOut)
	}
	p := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "a"))
	var ready roomReady
	p.ReadyLine(t, &ready)
	addr := strings.TrimSuffix(strings.TrimPrefix(ready.URL, "ws://"), "/v0/ws")
	code, _, errOut = c.run("room", "serve", "--listen", addr, "--data", data)
	if code != exitLocal || !strings.Contains(errOut, "address already in use") {
		t.Fatalf("listen in use: code %d, stderr %q", code, errOut)
	}
}

func TestRoomServe_SettingsFromConfigFile(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	c.writeConfig("[room]\nlisten = \"127.0.0.1:0\"\ncompat = \"reference\"\ndata = \"" + data + "\"\n")
	p := startCVM(t, c, "room", "serve")
	var ready roomReady
	p.ReadyLine(t, &ready)
	if ready.Compat != "reference" || ready.Data != data {
		t.Fatalf("ready line %+v: the [room] table was not applied", ready)
	}
	tok := mint(t, c, "--topic", "room:x", "--id", "alice") // [room] data applies to token too
	conn := roomDial(t, ready.URL, "room:x", tok)
	if first := roomRead(t, conn); first["kind"] != "presence" {
		t.Fatalf("first frame %v, want the reference order (own join first)", first)
	}
}
