package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/browsertest"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
)

// build holds the binaries the tests run, each built on first use: cvm,
// driven as users drive it, and the stdio demo server, an upstream for
// gateways (demoServer).
var build cvmtest.Build

// browser is the one Chromium of this package's page tests, started by the
// first of them and closed by TestMain.
var browser browsertest.Browser

func TestMain(m *testing.M) {
	runTestChild()
	if path := os.Getenv(execLogEnv); path != "" {
		runExecLogServer(path)
	}
	cvmtest.Main(m, &build, browser.Close)
}

// demoServer is the stdio demo server's executable.
func demoServer(t testing.TB) string {
	t.Helper()
	return build.Path(t, "github.com/cvmgo/cvm/examples/demoserver/cmd")
}

// serverEverything returns node and the entry point of
// @modelcontextprotocol/server-everything, from interop's pinned packages:
// an MCP server from the npm registry, for gateways and bridges.
func serverEverything(t *testing.T) (node, script string) {
	t.Helper()
	script = filepath.Join("..", "..", "interop", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatal("interop/node_modules is missing; run: make interop-deps")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH")
	}
	return node, script
}

// proc is a running cvm process started by a test.
type proc = cvmtest.Proc

// startCVM runs the cvm binary with c's private HOME and XDG directories.
func startCVM(t testing.TB, c *cli, args ...string) *proc {
	t.Helper()
	return cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: c.environ()}, args...)
}

type relayReady struct {
	Ready   bool   `json:"ready"`
	URL     string `json:"url"`
	Metrics string `json:"metrics"`
	DB      string `json:"db"`
	Memory  bool   `json:"memory"`
}

func TestRelayCommand_ReadyServeAndSignal(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCLI(t)
			p := startCVM(t, c, "relay", "--listen", "127.0.0.1:0", "--memory")
			var ready relayReady
			p.ReadyLine(t, &ready)
			if !ready.Ready || !strings.HasPrefix(ready.URL, "ws://127.0.0.1:") || !ready.Memory {
				t.Fatalf("ready line %+v", ready)
			}
			publishAndQuery(t, ready.URL)
			if code := p.Stop(t, sig); code != 0 {
				t.Fatalf("exit code %d after %v; stderr: %s", code, sig, p.Stderr)
			}
			rest, _ := io.ReadAll(p.Stdout)
			if len(rest) != 0 {
				t.Errorf("stdout after the ready line: %q", rest)
			}
			if !strings.Contains(p.Stderr.String(), "shutting down") {
				t.Errorf("stderr lacks the shutdown log: %s", p.Stderr)
			}
		})
	}
}

func TestRelayCommand_DefaultDatabasePersists(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "relay", "--listen", "127.0.0.1:0")
	var ready relayReady
	p.ReadyLine(t, &ready)
	want := filepath.Join(c.env["XDG_DATA_HOME"], "cvm", "relay.db")
	if ready.DB != want {
		t.Fatalf("db %q, want %q", ready.DB, want)
	}
	evt := publishAndQuery(t, ready.URL)
	p.Stop(t, syscall.SIGTERM)

	p = startCVM(t, c, "relay", "--listen", "127.0.0.1:0")
	p.ReadyLine(t, &ready)
	if got := queryIDs(t, ready.URL, nostr.Filter{IDs: []nostr.ID{evt.ID}}); len(got) != 1 {
		t.Fatal("event lost across a restart on the default database")
	}
}

func TestRelayCommand_ListenInUse(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "relay", "--listen", "127.0.0.1:0", "--memory")
	var ready relayReady
	p.ReadyLine(t, &ready)
	addr := strings.TrimPrefix(ready.URL, "ws://")
	code, _, errOut := c.run("relay", "--listen", addr, "--memory")
	if code != exitLocal || !strings.Contains(errOut, "address already in use") {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
}

// A second relay on the same database says that one runs there, and what
// to do, as a second gateway with the same key does.
func TestRelayCommand_OneProcessPerDatabase(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "relay", "--listen", "127.0.0.1:0")
	var ready relayReady
	p.ReadyLine(t, &ready)
	code, out, errOut := c.run("relay", "--listen", "127.0.0.1:0")
	want := "cvm: another cvm relay already runs on " + ready.DB + "; stop it, or give this one another --db, or --memory\n"
	if code != exitLocal || out != "" || errOut != want {
		t.Fatalf("code %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, want)
	}
}

// publishAndQuery stores one event through url and reads it back.
func publishAndQuery(t *testing.T, url string) nostr.Event {
	t.Helper()
	evt := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: "hello", Tags: nostr.Tags{}}
	evt.Sign(nostr.Generate())
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	frame, _ := json.Marshal([]any{"EVENT", evt})
	conn.Write(ctx, websocket.MessageText, frame)
	_, data, err := conn.Read(ctx)
	if err != nil || !strings.Contains(string(data), `"OK"`) || !strings.Contains(string(data), "true") {
		t.Fatalf("publish: %s %v", data, err)
	}
	if got := queryIDs(t, url, nostr.Filter{IDs: []nostr.ID{evt.ID}}); len(got) != 1 {
		t.Fatal("published event not served")
	}
	return evt
}

func queryIDs(t *testing.T, url string, f nostr.Filter) []string {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	frame, _ := json.Marshal([]any{"REQ", "q", f})
	conn.Write(ctx, websocket.MessageText, frame)
	var out []string
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var msg []json.RawMessage
		json.Unmarshal(data, &msg)
		switch string(msg[0]) {
		case `"EVENT"`:
			var evt nostr.Event
			json.Unmarshal(msg[2], &evt)
			out = append(out, evt.ID.Hex())
		case `"EOSE"`:
			return out
		}
	}
}

// syncBuffer collects a child's stderr while tests read it.
type syncBuffer = waitbuf.Buffer
