package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

// piped is a cvm process driven through stdin and stdout, as a program
// drives "cvm room chat": lines are what it prints.
type piped struct {
	*proc
	lines <-chan string
}

func startPiped(t *testing.T, c *cli, args ...string) *piped {
	t.Helper()
	p := startCVM(t, c, args...)
	return &piped{proc: p, lines: readLines(t, p.Stdout)}
}

// readLines reads r line by line into the channel it returns, closed at
// the end of r. A terminal ends its lines with "\r\n": the "\r" goes too.
func readLines(t testing.TB, r io.Reader) <-chan string {
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- strings.TrimSuffix(sc.Text(), "\r"):
			case <-t.Context().Done(): // nobody reads any more
				return
			}
		}
	}()
	return lines
}

// expectLine reads lines until one contains want, and returns it. The end
// of the lines, or none within the deadline, fails t, with what was seen
// and more().
func expectLine(t *testing.T, lines <-chan string, want string, more func() string) string {
	t.Helper()
	deadline := time.After(testwait.Timeout(20 * time.Second))
	var seen []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("output ended without %q; saw %q%s", want, seen, more())
			}
			if strings.Contains(line, want) {
				return line
			}
			seen = append(seen, line)
		case <-deadline:
			t.Fatalf("no line with %q; saw %q%s", want, seen, more())
		}
	}
}

func (p *piped) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.Stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// expect reads lines until one contains want, and returns it.
func (p *piped) expect(t *testing.T, want string) string {
	t.Helper()
	return expectLine(t, p.lines, want, func() string { return "; stderr: " + p.Stderr.String() })
}

// expectJSON reads JSON lines until one has event ev and satisfies pred.
func (p *piped) expectJSON(t *testing.T, ev string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	for {
		line := p.expect(t, `"event":"`+ev+`"`)
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if pred == nil || pred(m) {
			return m
		}
	}
}

// A gateway, a bridge in front of server-everything and two chats, one
// driven as a program does (--json) and one as a person reads it, all
// through "cvm" processes and pipes.
func TestRoomChatAndBridge_ThroughPipes(t *testing.T) {
	node, everything := serverEverything(t)
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	gw.ReadyLine(t, &ready)
	base := ready.REST
	tokenFile := filepath.Join(t.TempDir(), "alpha.token")
	os.WriteFile(tokenFile, []byte(mint(t, c, "--data", data, "--topic", "room:x", "--id", "alpha", "--kind", "robot")+"\n"), 0o600)

	bridge := startCVM(t, c, "room", "bridge", "--gateway", base, "--topic", "room:x", "--token-file", tokenFile, "--", node, everything, "stdio")
	var bready struct {
		Ready       bool   `json:"ready"`
		Participant string `json:"participant"`
		Server      struct {
			Name string `json:"name"`
		} `json:"server"`
	}
	bridge.ReadyLine(t, &bready)
	if !bready.Ready || bready.Participant != "alpha" || bready.Server.Name != "mcp-servers/everything" {
		t.Fatalf("bridge ready line %+v", bready)
	}

	alice := startPiped(t, c, "--json", "room", "chat", "--gateway", base, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "alice", "--kind", "human"))
	r := alice.expectJSON(t, "ready", nil)
	if ps, _ := r["participants"].([]any); len(ps) != 1 || ps[0].(map[string]any)["id"] != "alpha" {
		t.Fatalf("alice's ready line %v", r)
	}
	bob := startPiped(t, c, "room", "chat", "--gateway", base, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "bob"))
	bob.expect(t, "* joined room:x as bob; here: alice, alpha")
	alice.expectJSON(t, "join", func(m map[string]any) bool { return m["participant"].(map[string]any)["id"] == "bob" })

	bob.say(t, "hello alice")
	m := alice.expectJSON(t, "chat", nil)
	if m["from"] != "bob" || m["text"] != "hello alice" || m["mine"] != false {
		t.Fatalf("alice got %v", m)
	}
	alice.say(t, "hi bob, watch this")
	bob.expect(t, "<alice> hi bob, watch this")

	alice.say(t, "/tools alpha")
	tools := alice.expectJSON(t, "tools", nil)
	if !strings.Contains(string(mustJSON(t, tools["result"])), `"name":"echo"`) {
		t.Fatalf("tools %v", tools)
	}
	alice.say(t, `/call alpha echo {"message": "through the room"}`)
	res := alice.expectJSON(t, "result", nil)
	if !strings.Contains(string(mustJSON(t, res["result"])), "Echo: through the room") {
		t.Fatalf("call result %v", res)
	}
	bob.say(t, `/call alpha get-sum {"a": 1, "b": 2}`)
	bob.expect(t, "* alpha get-sum: The sum of 1 and 2 is 3.")
	bob.say(t, "/call alpha echo {not json")
	bob.expect(t, "! /call alpha echo {not json: /call arguments must be a JSON object")
	bob.say(t, "/tools nobody")
	bob.expect(t, "! /tools nobody: ")

	alice.say(t, "/history 3")
	h := alice.expectJSON(t, "history", nil)
	if envs, _ := h["envelopes"].([]any); len(envs) != 3 {
		t.Fatalf("history %v", h)
	}
	bob.say(t, "/who")
	bob.expect(t, "* bob (you)")

	// End of input leaves the room; the others see it.
	alice.Stdin.Close()
	if code := alice.Wait(t); code != 0 {
		t.Fatalf("alice exited %d; stderr: %s", code, alice.Stderr)
	}
	bob.expect(t, "* alice left (closed)")
	if code := bob.Stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("bob exited %d after SIGINT", code)
	}
	if code := bridge.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("bridge exited %d after SIGTERM; stderr: %s", code, bridge.Stderr)
	}
}

func TestRoomChat_UsageErrors(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"room", "chat", "--token", "x"}, "--topic is required"},
		{[]string{"room", "chat", "--topic", "room:x"}, "--token or --token-file is required"},
		{[]string{"room", "chat", "--topic", "room:x", "--token", "a", "--token-file", "b"}, "not both"},
		{[]string{"room", "bridge", "--topic", "room:x", "--token", "a"}, "room bridge wants at least 1 argument, got none\nusage:  cvm room bridge"},
		{[]string{"room", "bridge", "--topic", "room:x", "--token", "a", "--", "/no/such/server"}, "command /no/such/server"},
		{[]string{"room", "chat", "--topic", "room:x", "--token-file", "/no/such/file"}, "--token-file"},
	} {
		code, _, errOut := c.run(tc.args...)
		if code != exitLocal || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestRoomChat_RefusedTokenIsARemoteFailure(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	gw.ReadyLine(t, &ready)
	tok := mint(t, c, "--data", data, "--topic", "room:other", "--id", "alice")
	code, _, errOut := c.run("room", "chat", "--gateway", ready.REST, "--topic", "room:x", "--token", tok)
	if code != exitRemote || !strings.Contains(errOut, "403") {
		t.Fatalf("exit %d, stderr %q; want 1 and the gateway's 403", code, errOut)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
