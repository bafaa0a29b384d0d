package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/admission"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

type gatewayReady struct {
	Ready    bool     `json:"ready"`
	Pubkey   string   `json:"pubkey"`
	Npub     string   `json:"npub"`
	Relays   []string `json:"relays"`
	Mode     string   `json:"mode"`
	Upstream string   `json:"upstream"`
	Metrics  string   `json:"metrics"`
}

func TestGatewayCommand_ServesAndShutsDownCleanly(t *testing.T) {
	for _, mode := range []string{"per-client", "shared"} {
		t.Run(mode, func(t *testing.T) {
			r := relaytest.Start(t, relay.Options{})
			c := newCLI(t)
			p := startCVM(t, c, "gateway", "--relay", r.URL, "--session-mode", mode, "--metrics", "127.0.0.1:0", "--", demoServer(t))
			var ready gatewayReady
			p.ReadyLine(t, &ready)
			pk, err := nostrx.ParsePublicKey(ready.Npub)
			if !ready.Ready || err != nil || pk.Key.Hex() != ready.Pubkey || len(ready.Relays) != 1 || ready.Relays[0] != r.URL ||
				ready.Mode != mode || ready.Upstream != demoServer(t) || !strings.HasPrefix(ready.Metrics, "http://127.0.0.1:") {
				t.Fatalf("ready line %+v", ready)
			}

			// A client on the same machine, with the same default identity
			// the gateway created, reaches it.
			code, out, errOut := c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL)
			if code != 0 || out != `{"sum":3}`+"\n" {
				t.Fatalf("call through the gateway: code %d, %q, %q", code, out, errOut)
			}
			if body := get(t, ready.Metrics); !strings.Contains(body, `cvm_gateway_requests_total{method="tools/call",outcome="ok"} 1`) {
				t.Errorf("metrics lack the call:\n%s", grep(body, "cvm_gateway_requests_total"))
			}
			if body := get(t, strings.TrimSuffix(ready.Metrics, "/metrics")+"/healthz"); !strings.Contains(body, `"status":"ok"`) {
				t.Errorf("healthz: %s", body)
			}

			// A call in flight at SIGTERM is answered with an error.
			// Its first progress line says the call runs in the upstream.
			inflight := startCVM(t, c, "call", ready.Npub, "count", "n=100", "delay_ms=100", "--relay", r.URL)
			inflight.Stderr.Await(t, 20*time.Second, "progress 1/100")
			if code := p.Stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit code %d after SIGTERM; stderr: %s", code, p.Stderr)
			}
			if code := inflight.Wait(t); code != exitTransport || !strings.Contains(inflight.Stderr.String(), "shutting down") {
				t.Errorf("call in flight at shutdown: exit %d, stderr %s", code, inflight.Stderr)
			}
			if rest, _ := io.ReadAll(p.Stdout); len(rest) != 0 {
				t.Errorf("stdout after the ready line: %q", rest)
			}
			if !strings.Contains(p.Stderr.String(), "shutting down") {
				t.Errorf("stderr lacks the shutdown log: %s", p.Stderr)
			}
		})
	}
}

func TestGatewayCommand_BadInput(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway"}, "no upstream MCP server: give one as cvm gateway [flags] -- COMMAND"},
		{[]string{"gateway", "node", "server.js"}, "put the upstream command after --"},
		{[]string{"gateway", "--", "cvm-no-such-command"}, `upstream command "cvm-no-such-command": exec: "cvm-no-such-command": executable file not found`},
		{[]string{"gateway", "--", "sh", "-c", "echo missing API key >&2; exit 3"}, `exited before answering initialize (exit status 3; its last words on stderr: "missing API key"); run it by itself`},
		{[]string{"gateway", "--", "sh", "-c", "echo hello"}, "wrote something other than JSON-RPC"},
		{[]string{"gateway", "--upstream-url", "http://127.0.0.1:1/mcp"}, "connection refused; is it running at http://127.0.0.1:1/mcp?"},
		{[]string{"gateway", "--upstream-url", "ftp://x"}, "want an http:// or https:// URL"},
		{[]string{"gateway", "--session-mode", "solo", "--", "true"}, "want per-client or shared"},
		{[]string{"gateway", "--allow", "npub1nope", "--", "true"}, "--allow: invalid key"},
		{[]string{"gateway", "--public", "get_weather", "--", "true"}, "want METHOD[:NAME]"},
		{[]string{"gateway", "-e", "TOKEN", "--", "true"}, `-e "TOKEN": want KEY=VALUE`},
		{[]string{"gateway", "--session-rate", "0", "--", "true"}, "--session-rate must be positive"},
		{[]string{"gateway", "--session-burst", "0", "--", "true"}, "--session-burst at least 1"},
		{[]string{"gateway", "--price", "tool:add=-5", "--", "true"}, `--price: bad price: amount "-5": a price cannot be negative`},
		{[]string{"gateway", "--price", "tool:add=100000000000000000000", "--", "true"}, "100000000000000000000 is more than any price can be"},
		{[]string{"gateway", "--price", "tool:add=", "--", "true"}, `amount "": no amount`},
		{[]string{"gateway", "--max-sessions", "2", "--session-reserve", "3", "--", "true"}, "--session-reserve 3: want 0 to --max-sessions (2)"},
		{[]string{"gateway", "--session-reserve", "-1", "--", "true"}, "--session-reserve -1: want 0 to --max-sessions (64)"},
	} {
		code, out, errOut := c.run(tc.args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		last := lines[len(lines)-1]
		if code != exitLocal || out != "" || !strings.HasPrefix(last, "cvm: ") || !strings.Contains(last, tc.want) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// --session-reserve 0 keeps no reserve, and the default takes at most
// half of a small --max-sessions (the library's default) rather than
// refusing to start.
func TestGatewayOptions_SessionReserve(t *testing.T) {
	a := &app{log: discardLogger()}
	for _, tc := range []struct{ flag, maxSessions, want int }{
		{0, 64, -1},
		{admission.DefaultReserve, 64, 0},
		{admission.DefaultReserve, 2, 0},
		{10, 64, 10},
	} {
		opts, err := (&gatewayCmd{app: a, gf: gatewayFlags{mode: "per-client", maxSessions: tc.maxSessions, sessionReserve: tc.flag}}).options()
		if err != nil || opts.SessionReserve != tc.want {
			t.Errorf("--session-reserve %d --max-sessions %d: SessionReserve %d, %v; want %d", tc.flag, tc.maxSessions, opts.SessionReserve, err, tc.want)
		}
	}
}

func TestConfig_ShowsClientAndGatewaySettings(t *testing.T) {
	c := newCLI(t)
	c.writeConfig("relays = [\"ws://127.0.0.1:7001\"]\n[servers]\nweather = \"npub1xyz\"\n[gateway]\nsession-mode = \"shared\"\n")
	c.env["CVM_TIMEOUT"] = "5s"
	code, out, errOut := c.run("config", "--json")
	if code != 0 {
		t.Fatalf("config: %d %s", code, errOut)
	}
	var res struct {
		Settings []struct{ Key, Value, Source string }
	}
	json.Unmarshal([]byte(out), &res)
	want := map[string][2]string{
		"relays":               {"ws://127.0.0.1:7001", "file"},
		"servers.weather":      {"npub1xyz", "file"},
		"gateway.session-mode": {"shared", "file"},
		"timeout":              {"5s", "env"},
		"encryption":           {"optional", "default"},
		"gateway.allow":        {"", "default"},
	}
	for _, s := range res.Settings {
		if w, ok := want[s.Key]; ok {
			if s.Value != w[0] || s.Source != w[1] {
				t.Errorf("%s = %q from %s, want %q from %s", s.Key, s.Value, s.Source, w[0], w[1])
			}
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing settings: %v", want)
	}
	if strings.Contains(errOut, "no command reads") {
		t.Errorf("a setting was reported as unread: %s", errOut)
	}
}

func get(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grep(body, prefix string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestGatewayCommand_AllowAndPublic(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	friendKey := filepath.Join(t.TempDir(), "friend")
	code, out, errOut := c.run("keygen", "--out", friendKey, "--json")
	var friend struct{ Npub string }
	if code != 0 || json.Unmarshal([]byte(out), &friend) != nil {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--allow", friend.Npub, "--public", "tools/list", "--", demoServer(t))
	var ready gatewayReady
	p.ReadyLine(t, &ready)

	// A stranger may list the tools, not call them; the refusal is the
	// server's answer (exit 3), in one line.
	if code, out, errOut := c.run("tools", ready.Npub, "--relay", r.URL); code != 0 || !strings.Contains(out, "add") {
		t.Fatalf("public tools/list: %d %q %q", code, out, errOut)
	}
	code, out, errOut = c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL)
	if code != exitProtocol || out != "" || !strings.Contains(errOut, "unauthorized") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("stranger's call: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL, "--key", friendKey); code != 0 || out != `{"sum":3}`+"\n" {
		t.Fatalf("allowed client's call: %d %q %q", code, out, errOut)
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// --inject-client-pubkey tells a stdio upstream who is calling (CEP-16),
// in each mode; without it the upstream learns nothing.
func TestGatewayCommand_InjectsTheClientPubkey(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	key := filepath.Join(t.TempDir(), "client")
	code, out, errOut := c.run("keygen", "--out", key, "--json")
	var client struct{ Pubkey string }
	if code != 0 || json.Unmarshal([]byte(out), &client) != nil {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--inject-client-pubkey"}, client.Pubkey},
		{[]string{"--inject-client-pubkey", "--session-mode", "shared"}, client.Pubkey},
		{nil, "unknown"},
	} {
		args := append([]string{"gateway", "--relay", r.URL}, tc.flags...)
		p := startCVM(t, c, append(args, "--", demoServer(t))...)
		var ready gatewayReady
		p.ReadyLine(t, &ready)
		code, out, errOut := c.run("call", ready.Npub, "caller", "--relay", r.URL, "--key", key)
		if code != 0 || strings.TrimSpace(out) != tc.want {
			t.Errorf("%v: code %d, %q, %q; want %s", tc.flags, code, out, errOut, tc.want)
		}
		p.Stop(t, syscall.SIGTERM)
	}
}

// Two gateways with one key and one data directory would both act on every
// request; the second is refused at once, with what to do.
func TestGatewayCommand_OneProcessPerKeyAndDataDirectory(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	key := filepath.Join(t.TempDir(), "key")
	if code, _, errOut := c.run("keygen", "--out", key); code != 0 {
		t.Fatal(errOut)
	}
	data := t.TempDir()
	first := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--data", data, "--", demoServer(t))
	var ready gatewayReady
	first.ReadyLine(t, &ready)
	code, _, errOut := c.run("gateway", "--relay", r.URL, "--key", key, "--data", data, "--", demoServer(t))
	if code != exitLocal || !strings.Contains(errOut, "already runs") {
		t.Fatalf("second gateway: exit %d, %q", code, errOut)
	}
	// Another key may share the directory.
	other := filepath.Join(t.TempDir(), "key")
	c.run("keygen", "--out", other)
	second := startCVM(t, c, "gateway", "--relay", r.URL, "--key", other, "--data", data, "--", demoServer(t))
	second.ReadyLine(t, &ready)
}

// One-shot calls, each with a throwaway key, against a per-client gateway:
// the first, to a server it does not know yet, opens a session (an upstream
// process of its own); the rest are stateless and share one upstream
// process. Each call's result is what it always was. Before, every call
// left a process behind for --idle-timeout. --isolate-stateless brings
// that back for an upstream whose state clients must not share.
func TestGatewayCommand_OneShotCallsShareOneUpstream(t *testing.T) {
	for _, tc := range []struct {
		flags              []string
		calls              int
		minAlive, maxAlive int
	}{
		{nil, 20, 1, 2},
		{[]string{"--isolate-stateless"}, 3, 3, 3},
	} {
		t.Run(strings.Join(append([]string{"default"}, tc.flags...), " "), func(t *testing.T) {
			// Every call opens connections of its own, all from 127.0.0.1.
			r := relaytest.Start(t, relay.Options{Limits: relay.Limits{ConnectionsPerSecond: -1}})
			pids := t.TempDir()
			// Each upstream process records its pid ($$, kept by exec).
			args := append([]string{"gateway", "--relay", r.URL, "--metrics", "127.0.0.1:0"}, tc.flags...)
			args = append(args, "--", "sh", "-c", `echo $$ > "$0/$$" && exec "$1"`, pids, demoServer(t))
			gw := startCVM(t, newCLI(t), args...)
			var ready gatewayReady
			gw.ReadyLine(t, &ready)

			client := newCLI(t) // no key anywhere: a throwaway key per call
			for i := range tc.calls {
				code, out, errOut := client.run("call", ready.Npub, "add", "a=1", fmt.Sprintf("b=%d", i), "--relay", r.URL)
				if want := fmt.Sprintf(`{"sum":%d}`+"\n", i+1); code != 0 || out != want {
					t.Fatalf("call %d: exit %d, %q, want %q; stderr: %s", i, code, out, want, errOut)
				}
			}
			if n := grep(get(t, ready.Metrics), "cvm_gateway_sessions "); n != fmt.Sprintf("cvm_gateway_sessions %d", tc.calls) {
				t.Errorf("%s; want a client session per call", n)
			}
			alive := livePIDs(t, pids)
			if len(alive) < tc.minAlive || len(alive) > tc.maxAlive {
				t.Fatalf("%d upstream processes alive after %d one-shot calls (%v), want %d to %d", len(alive), tc.calls, alive, tc.minAlive, tc.maxAlive)
			}
			t.Logf("%d one-shot calls: %d upstream processes alive", tc.calls, len(alive))
		})
	}
}

// livePIDs lists the processes that recorded their pid in dir and are
// still running.
func livePIDs(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var alive []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatalf("pid file %q", e.Name())
		}
		if syscall.Kill(pid, 0) == nil {
			alive = append(alive, pid)
		}
	}
	return alive
}
