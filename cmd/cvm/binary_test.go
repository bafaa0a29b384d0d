package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/cvmgo/cvm/internal/secp"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"go.uber.org/goleak"
)

// cvmBinary is built once by TestMain; end-to-end tests drive it as users
// do. demoServerBinary is the stdio demo server, an upstream for gateways.
var cvmBinary, demoServerBinary string

// browser is the one Chromium of this package's page tests, started by the
// first of them and closed by TestMain.
var browser browsertest.Browser

func TestMain(m *testing.M) {
	runTestChild()
	if path := os.Getenv(execLogEnv); path != "" {
		runExecLogServer(path)
	}
	dir, err := os.MkdirTemp("", "cvm-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cvmBinary = filepath.Join(dir, "cvm")
	demoServerBinary = filepath.Join(dir, "demoserver")
	for out, pkg := range map[string]string{cvmBinary: ".", demoServerBinary: "../../examples/demoserver/cmd"} {
		// The crypto backend of this test binary (see package secp).
		args := []string{"build", "-o", out}
		if secp.Backend == "libsecp256k1" {
			args = append(args, "-tags", "libsecp256k1")
		}
		build := exec.Command("go", append(args, pkg)...)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	browser.Close()
	if code == 0 {
		// goleak.VerifyTestMain would exit before the binaries are removed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running cvm process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
}

// startCVM runs the binary with a private HOME and XDG directories.
func startCVM(t testing.TB, c *cli, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(cvmBinary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: in, stdout: bufio.NewReader(out), stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// readyLine reads the one JSON line a long-running command prints when ready.
func (p *proc) readyLine(t testing.TB, v any) {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		line, _ := p.stdout.ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), v); err != nil {
			t.Fatalf("ready line %q: %v (stderr: %s)", line, err, p.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no ready line; stderr: %s", p.stderr)
	}
}

// wait returns the exit code once the process has exited by itself.
func (p *proc) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("process did not exit; stderr: %s", p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop sends sig and returns the exit code, failing if the process lingers.
func (p *proc) stop(t testing.TB, sig os.Signal) int {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("process did not exit after %v; stderr: %s", sig, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
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
			p.readyLine(t, &ready)
			if !ready.Ready || !strings.HasPrefix(ready.URL, "ws://127.0.0.1:") || !ready.Memory {
				t.Fatalf("ready line %+v", ready)
			}
			publishAndQuery(t, ready.URL)
			if code := p.stop(t, sig); code != 0 {
				t.Fatalf("exit code %d after %v; stderr: %s", code, sig, p.stderr)
			}
			rest, _ := io.ReadAll(p.stdout)
			if len(rest) != 0 {
				t.Errorf("stdout after the ready line: %q", rest)
			}
			if !strings.Contains(p.stderr.String(), "shutting down") {
				t.Errorf("stderr lacks the shutdown log: %s", p.stderr)
			}
		})
	}
}

func TestRelayCommand_DefaultDatabasePersists(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "relay", "--listen", "127.0.0.1:0")
	var ready relayReady
	p.readyLine(t, &ready)
	want := filepath.Join(c.env["XDG_DATA_HOME"], "cvm", "relay.db")
	if ready.DB != want {
		t.Fatalf("db %q, want %q", ready.DB, want)
	}
	evt := publishAndQuery(t, ready.URL)
	p.stop(t, syscall.SIGTERM)

	p = startCVM(t, c, "relay", "--listen", "127.0.0.1:0")
	p.readyLine(t, &ready)
	if got := queryIDs(t, ready.URL, nostr.Filter{IDs: []nostr.ID{evt.ID}}); len(got) != 1 {
		t.Fatal("event lost across a restart on the default database")
	}
}

func TestRelayCommand_ListenInUse(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "relay", "--listen", "127.0.0.1:0", "--memory")
	var ready relayReady
	p.readyLine(t, &ready)
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
	p.readyLine(t, &ready)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
