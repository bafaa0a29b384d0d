package interop

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// everything is @modelcontextprotocol/server-everything's entry point; it
// serves stdio by default.
func everything(t *testing.T) string {
	t.Helper()
	requireNodeModules(t)
	p, err := filepath.Abs(filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal("server-everything is missing; run: make interop-deps")
	}
	return p
}

// cvmEnv is the environment of a cvm process: a private HOME, so that the
// identity it creates stays in the test's directory.
func cvmEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data")}
}

type gatewayInfo struct {
	Npub   string   `json:"npub"`
	Pubkey string   `json:"pubkey"`
	Relays []string `json:"relays"`
	HTTP   string   `json:"http"` // with --http
	DID    string   `json:"did"`
	home   string
	stderr *waitbuf.Buffer // what the gateway logs
}

// startGateway runs `cvm gateway ARGS…` and waits for its ready line; the
// test's end stops it with SIGTERM and requires a clean exit.
func startGateway(t *testing.T, args ...string) gatewayInfo {
	t.Helper()
	return startGatewayEnv(t, nil, args...)
}

// startGatewayEnv is startGateway with env (KEY=VALUE) added to its
// environment.
func startGatewayEnv(t *testing.T, env []string, args ...string) gatewayInfo {
	t.Helper()
	home := t.TempDir()
	p := cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: append(cvmEnv(home), env...)}, append([]string{"gateway"}, args...)...)
	t.Cleanup(func() {
		if code := p.Stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("gateway exit %d after SIGTERM; stderr: %s", code, p.Stderr)
		}
	})
	var info gatewayInfo
	p.ReadyLine(t, &info)
	if info.Npub == "" {
		t.Fatalf("gateway ready line without an npub: %+v; stderr: %s", info, p.Stderr)
	}
	info.home, info.stderr = home, p.Stderr
	return info
}

// cvm runs a one-shot cvm command and returns its exit code and output.
func cvm(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	return cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(home)}, args...)
}

type everythingResult struct {
	OK              bool           `json:"ok"`
	Error           string         `json:"error"`
	Step            string         `json:"step"`
	ServerInfo      map[string]any `json:"serverInfo"`
	HasInstructions bool           `json:"hasInstructions"`
	Capabilities    map[string]any `json:"capabilities"`
	Tools           []string       `json:"tools"`
	Echo            string         `json:"echo"`
	Sum             string         `json:"sum"`
	Progress        []float64      `json:"progress"`
	ProgressProbe   progressProbe  `json:"progressProbe"`
	ResourceCount   int            `json:"resourceCount"`
	Templates       []string       `json:"templates"`
	TemplateRead    string         `json:"templateRead"`
	Updated         []string       `json:"updated"`
	Prompts         []string       `json:"prompts"`
	SimplePrompt    string         `json:"simplePrompt"`
	ArgsPrompt      string         `json:"argsPrompt"`
	Completion      []string       `json:"completion"`
}

// TestGateway_ServerEverything: the MCP project's own everything server,
// unchanged, behind `cvm gateway`, reached by the reference TypeScript
// ContextVM client and by cvm's client commands, in both session modes.
func TestGateway_ServerEverything(t *testing.T) {
	server := everything(t)
	for _, mode := range []string{"per-client", "shared"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := relaytest.Start(t, relay.Options{})
			gw := startGateway(t, "--relay", r.URL, "--session-mode", mode, "--", "node", server)

			var res everythingResult
			runScript(t, "everything-client.mjs", map[string]string{"RELAY_URL": r.URL, "SERVER_PUBKEY": gw.Npub}, &res)
			if !res.OK {
				t.Fatalf("TS client failed in step %s: %s", res.Step, res.Error)
			}
			checkEverything(t, res)

			// Requests from the server to the client, answered by the
			// official TypeScript MCP client through cvm proxy: host ─
			// stdio ─ proxy ─ relay ─ gateway ─ stdio ─ server-everything.
			caps := "sampling,elicitation"
			calls := []toolCall{
				{Name: "trigger-sampling-request", Arguments: map[string]any{"prompt": "ping", "maxTokens": 5}},
				{Name: "trigger-elicitation-request", Arguments: map[string]any{}},
			}
			if mode == "per-client" {
				// Roots are per client: shared mode declares none upstream.
				caps += ",roots"
				calls = append(calls, toolCall{Name: "get-roots-list", Arguments: map[string]any{}})
			}
			host := runStdioHost(t, r.URL, gw.Npub, caps, calls)
			if !strings.Contains(host.Results[0].Text, "sampled: Resource trigger-sampling-request context: ping") {
				t.Errorf("sampling round trip: %q", host.Results[0].Text)
			}
			if !strings.Contains(host.Results[1].Text, "Ada Lovelace") {
				t.Errorf("elicitation round trip: %q", host.Results[1].Text)
			}
			if mode == "per-client" && !strings.Contains(host.Results[2].Text, "file:///tmp/cvm-interop-root") {
				t.Errorf("roots round trip: %q", host.Results[2].Text)
			}

			// cvm's own client commands, through the same gateway.
			code, out, errOut := cvm(t, gw.home, "call", gw.Npub, "get-sum", "a=2", "b=3", "--relay", r.URL)
			if code != 0 || !strings.Contains(out, "5") {
				t.Errorf("cvm call get-sum: %d %q %q", code, out, errOut)
			}
			code, out, errOut = cvm(t, gw.home, "call", gw.Npub, "trigger-long-running-operation", "duration=0.3", "steps=3", "--relay", r.URL)
			if code != 0 || !strings.Contains(out, "Long running operation completed") || !strings.Contains(errOut, "progress 3/3") {
				t.Errorf("cvm call with progress: %d %q %q", code, out, errOut)
			}
			code, out, errOut = cvm(t, gw.home, "resources", gw.Npub, "--read", "demo://resource/dynamic/text/3", "--relay", r.URL)
			if code != 0 || !strings.Contains(out, "Resource 3") {
				t.Errorf("cvm resources --read (template): %d %q %q", code, out, errOut)
			}
			code, out, errOut = cvm(t, gw.home, "prompts", gw.Npub, "--get", "args-prompt", "city=Lyon", "--relay", r.URL)
			if code != 0 || !strings.Contains(out, "Lyon") {
				t.Errorf("cvm prompts --get: %d %q %q", code, out, errOut)
			}
			code, _, errOut = cvm(t, gw.home, "call", gw.Npub, "get-sum", "a=two", "b=3", "--relay", r.URL)
			if code != 2 || !strings.Contains(errOut, `argument a: "two" is not a number`) {
				t.Errorf("cvm call with a bad argument: %d %q", code, errOut)
			}
		})
	}
}

// TestGateway_StatelessClientsShareOneUpstream: twenty one-shot clients of
// the reference SDK in stateless mode (CEP-35), each with a fresh key,
// against a per-client gateway over server-everything: each gets its answer
// (progress included), as a stateful client gets the same one, and they
// cost one upstream process between them, where each used to leave one
// behind for --idle-timeout. The stateful client still gets its own.
func TestGateway_StatelessClientsShareOneUpstream(t *testing.T) {
	server := everything(t)
	// Every client opens a connection of its own, all from 127.0.0.1.
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{ConnectionsPerSecond: -1}})
	pids := t.TempDir()
	// Each upstream process records its pid ($$, kept by exec).
	gw := startGateway(t, "--relay", r.URL, "--", "sh", "-c", `echo $$ > "$0/$$" && exec node "$1"`, pids, server)

	const n = 20
	var res struct {
		OK          bool          `json:"ok"`
		Error       string        `json:"error"`
		Step        string        `json:"step"`
		Sums        []string      `json:"sums"`
		StatefulSum string        `json:"statefulSum"`
		Progress    []float64     `json:"progress"`
		Probe       progressProbe `json:"progressProbe"`
	}
	runScript(t, "stateless-clients.mjs", map[string]string{"RELAY_URL": r.URL, "SERVER_PUBKEY": gw.Npub, "N": fmt.Sprint(n)}, &res)
	if !res.OK {
		t.Fatalf("TS clients failed in step %s: %s", res.Step, res.Error)
	}
	for i, sum := range res.Sums {
		if want := fmt.Sprintf("The sum of %d and 1 is %d.", i, i+1); sum != want {
			t.Errorf("stateless client %d: %q, want %q", i, sum, want)
		}
	}
	if len(res.Sums) != n || res.StatefulSum != res.Sums[n-1] {
		t.Errorf("%d stateless answers; the stateful client's %q, the last stateless one's %q", len(res.Sums), res.StatefulSum, res.Sums[len(res.Sums)-1])
	}
	// Progress reaches a stateless client through the shared upstream.
	checkPeerProgress(t, "progress to a stateless client", res.Progress, []float64{1, 2, 3}, res.Probe, cvmProgressSettle)
	entries, err := os.ReadDir(pids)
	if err != nil {
		t.Fatal(err)
	}
	var alive []string
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && syscall.Kill(pid, 0) == nil {
			alive = append(alive, e.Name())
		}
	}
	// The stateless clients' shared one and the stateful client's.
	if len(alive) != 2 {
		t.Fatalf("%d upstream processes alive after %d stateless clients and one stateful (%v), want 2", len(alive), n, alive)
	}
}

func checkEverything(t *testing.T, res everythingResult) {
	t.Helper()
	if res.ServerInfo["name"] != "mcp-servers/everything" || !res.HasInstructions {
		t.Errorf("initialize: serverInfo %v, instructions %v", res.ServerInfo, res.HasInstructions)
	}
	if _, ok := res.Capabilities["completions"]; !ok && res.Completion == nil {
		t.Errorf("capabilities %v", res.Capabilities)
	}
	for _, tool := range []string{"echo", "get-sum", "trigger-long-running-operation", "toggle-subscriber-updates"} {
		if !slices.Contains(res.Tools, tool) {
			t.Errorf("tools %v lack %s", res.Tools, tool)
		}
	}
	if !strings.Contains(res.Echo, "héllo 🌍") || !strings.Contains(res.Sum, "5") {
		t.Errorf("echo %q, sum %q", res.Echo, res.Sum)
	}
	checkPeerProgress(t, "trigger-long-running-operation", res.Progress, []float64{1, 2, 3}, res.ProgressProbe, cvmProgressSettle)
	if res.ResourceCount == 0 || !slices.Contains(res.Templates, "demo://resource/dynamic/text/{resourceId}") || !strings.Contains(res.TemplateRead, "Resource 7") {
		t.Errorf("resources: %d, templates %v, read %q", res.ResourceCount, res.Templates, res.TemplateRead)
	}
	if !slices.Equal(res.Updated, []string{"demo://resource/dynamic/text/7"}) {
		t.Errorf("subscription updates %v", res.Updated)
	}
	if !slices.Contains(res.Prompts, "simple-prompt") || res.SimplePrompt == "" || !strings.Contains(res.ArgsPrompt, "Lyon") {
		t.Errorf("prompts %v, simple %q, args %q", res.Prompts, res.SimplePrompt, res.ArgsPrompt)
	}
	if !slices.Equal(res.Completion, []string{"Engineering"}) {
		t.Errorf("completion %v", res.Completion)
	}
}

// TestGateway_ServerEverythingOverHTTP: server-everything in its
// streamable-HTTP mode (the TypeScript SDK's HTTP transport) behind
// `cvm gateway --upstream-url`, both modes. The subscription update comes on
// the HTTP session's GET stream, outside any request.
func TestGateway_ServerEverythingOverHTTP(t *testing.T) {
	url := startEverythingHTTP(t)
	for _, mode := range []string{"per-client", "shared"} {
		t.Run(mode, func(t *testing.T) {
			r := relaytest.Start(t, relay.Options{})
			gw := startGateway(t, "--relay", r.URL, "--session-mode", mode, "--upstream-url", url)
			var res everythingResult
			runScript(t, "everything-client.mjs", map[string]string{"RELAY_URL": r.URL, "SERVER_PUBKEY": gw.Npub}, &res)
			if !res.OK {
				t.Fatalf("TS client failed in step %s: %s", res.Step, res.Error)
			}
			checkEverything(t, res)
			host := runStdioHost(t, r.URL, gw.Npub, "sampling", []toolCall{
				{Name: "trigger-sampling-request", Arguments: map[string]any{"prompt": "over http", "maxTokens": 5}},
			})
			if !strings.Contains(host.Results[0].Text, "sampled: Resource trigger-sampling-request context: over http") {
				t.Errorf("sampling round trip: %q", host.Results[0].Text)
			}
		})
	}
}

// startEverythingHTTP runs server-everything's streamable-HTTP server on a
// free port and returns its endpoint.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := cvmtest.Start(t, "node", cvmtest.Options{Env: withEnv(map[string]string{"PORT": fmt.Sprint(port)})}, everything(t), "streamableHttp")
	t.Cleanup(func() { p.Terminate(os.Interrupt, 5*time.Second) })
	p.Stderr.Await(t, 30*time.Second, "listening on port")
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}
