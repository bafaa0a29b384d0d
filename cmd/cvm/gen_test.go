package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/clientgen"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// genGateway runs the demo server behind cvm gateway, on Nostr through a
// loopback relay and over MCP streamable HTTP.
func genGateway(t *testing.T, c *cli) (relayURL string, ready gatewayHTTPReady) {
	t.Helper()
	r := relaytest.Start(t, relay.Options{})
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--http", "127.0.0.1:0", "--", demoServer(t))
	p.ReadyLine(t, &ready)
	return r.URL, ready
}

// The Go client cvm gen writes for the demo server builds in a module of
// its own, and calls the server over Nostr and over HTTP.
func TestGen_GoClientCallsTheDemoServer(t *testing.T) {
	c := newCLI(t)
	relayURL, ready := genGateway(t, c)
	mod := t.TempDir()
	code, _, errOut := c.run("gen", "--lang", "go", "--package", "demo", "--relay", relayURL, "--out", filepath.Join(mod, "demo")+"/", ready.Npub)
	if code != 0 || !strings.Contains(errOut, "wrote "+filepath.Join(mod, "demo", "demo.go")+": 6 tools") {
		t.Fatalf("cvm gen: exit %d: %s", code, errOut)
	}
	// The same tools over HTTP: the hashes agree.
	if code, _, errOut := c.run("gen", "--check", filepath.Join(mod, "demo", "demo.go"), ready.HTTP); code != 0 || !strings.Contains(errOut, "matches "+ready.HTTP+": 6 tools") {
		t.Fatalf("cvm gen --check against the HTTP endpoint: exit %d: %s", code, errOut)
	}
	worktree, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(worktree, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": "module gentest\n\ngo 1.26\n\nrequire github.com/cvmgo/cvm v0.0.0\n\nreplace github.com/cvmgo/cvm => " + worktree + "\n",
		"go.sum": string(sum),
		"main.go": `package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gentest/demo"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]any{}
	c, err := demo.Connect(ctx, contextvm.ClientOptions{}) // the server and relays it was generated from
	check(err)
	sum, err := c.Add(ctx, demo.AddInput{A: 2, B: 3.5})
	check(err)
	out["sum"] = sum.Sum
	zone := "Europe/Paris"
	now, err := c.Time(ctx, demo.TimeInput{Zone: &zone})
	check(err)
	out["zone"] = now.Zone
	_, err = c.Time(ctx, demo.TimeInput{Zone: new(string("Nowhere/Atlantis"))})
	var te *demo.ToolError
	out["toolError"] = errors.As(err, &te)
	check(c.Close())
	h, err := demo.ConnectHTTP(ctx, os.Args[1], nil)
	check(err)
	wc, err := h.WordCount(ctx, demo.WordCountInput{Text: "one two three"})
	check(err)
	out["words"] = wc.Words
	check(h.Close())
	out["nilArguments"] = nilArguments(ctx)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

// nilArguments is what a server receives from New's client when a tool
// whose input is a map is called with a nil one.
func nilArguments(ctx context.Context) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	seen := make(chan string, 1)
	s.AddTool(&mcp.Tool{Name: "caller", InputSchema: json.RawMessage(` + "`" + `{"type":"object"}` + "`" + `)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			seen <- string(req.Params.Arguments)
			return &mcp.CallToolResult{}, nil
		})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	check(err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	check(err)
	c := demo.New(cs)
	defer c.Close()
	_, err = c.Caller(ctx, nil)
	check(err)
	return <-seen
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Offline: every module it needs is the worktree's, in the cache.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	bin := filepath.Join(mod, "gentest")
	if code, out, errOut := cvmtest.Run(t, goCommand(t), cvmtest.Options{Env: env, Dir: mod}, "build", "-o", bin, "."); code != 0 {
		t.Fatalf("go build: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := cvmtest.Run(t, bin, cvmtest.Options{Env: env}, ready.HTTP)
	var res struct {
		Sum       float64
		Zone      string
		ToolError bool
		Words     int
		// A nil map is sent as {}: arguments are an object, never null.
		NilArguments string
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("the generated client: exit %d, %s%s", code, out, errOut)
	}
	if res.Sum != 5.5 || res.Zone != "Europe/Paris" || !res.ToolError || res.Words != 3 || res.NilArguments != "{}" {
		t.Fatalf("the generated client got %+v", res)
	}
}

func goCommand(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is not on PATH")
	}
	return goBin
}

// The TypeScript module cvm gen writes compiles with the pinned tsc,
// strict, and calls the demo server over Nostr through @contextvm/sdk.
func TestGen_TypeScriptClientCallsTheDemoServer(t *testing.T) {
	node, _ := serverEverything(t) // node, and interop's node_modules
	interop, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	tsc := filepath.Join(interop, "typescript", "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatal("interop/typescript/node_modules is missing; run: make interop-deps")
	}
	c := newCLI(t)
	relayURL, ready := genGateway(t, c)
	dir := t.TempDir()
	code, _, errOut := c.run("gen", "--lang", "ts", "--package", "demo", "--relay", relayURL, "--out", filepath.Join(dir, "demo.ts"), ready.Npub)
	if code != 0 {
		t.Fatalf("cvm gen --lang ts: exit %d: %s", code, errOut)
	}
	files := map[string]string{
		"package.json": `{"type":"module"}`,
		"tsconfig.json": `{"compilerOptions":{"strict":true,"noEmitOnError":true,"noUnusedLocals":true,"target":"ES2022",
			"module":"NodeNext","moduleResolution":"NodeNext","skipLibCheck":true,"outDir":"out"},"files":["demo.ts","main.ts"]}`,
		"main.ts": `import { DemoClient, ToolError } from './demo.js';

const out: Record<string, unknown> = {};
const c = await DemoClient.connect({ logLevel: 'error' }); // the server and relays it was generated from
const sum = await c.add({ a: 2, b: 3.5 });
out.sum = sum.sum;
const words = await c.wordCount({ text: 'one two three' });
out.words = words.words;
try {
  await c.time({ zone: 'Nowhere/Atlantis' });
} catch (err) {
  out.toolError = err instanceof ToolError;
}
await c.close();
console.log(JSON.stringify(out));
(globalThis as unknown as { process: { exit(code: number): void } }).process.exit(0);
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(interop, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cvmtest.Run(t, node, cvmtest.Options{Dir: dir}, tsc, "-p", "."); code != 0 {
		t.Fatalf("tsc --strict: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := cvmtest.Run(t, node, cvmtest.Options{Dir: dir}, filepath.Join("out", "main.js"))
	var res struct {
		Sum       float64
		Words     int
		ToolError bool
	}
	if code != 0 || json.Unmarshal([]byte(lastLine(out)), &res) != nil {
		t.Fatalf("the generated client: exit %d, %s%s", code, out, errOut)
	}
	if res.Sum != 5.5 || res.Words != 3 || !res.ToolError {
		t.Fatalf("the generated client got %+v", res)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// versionedServer serves, under key, an MCP server whose tools are those
// of version 1 or 2 of an interface: 2 changes add's input, drops echo and
// adds mul.
func versionedServer(t *testing.T, relayURL string, key nostr.SecretKey, version int) func() {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "versioned", Version: "1"}, nil)
	type pair struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	type triple struct {
		pair
		C float64 `json:"c"`
	}
	type text struct {
		Text string `json:"text"`
	}
	answer := func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	if version == 1 {
		mcp.AddTool(s, &mcp.Tool{Name: "add"}, func(ctx context.Context, r *mcp.CallToolRequest, _ pair) (*mcp.CallToolResult, any, error) {
			return answer(ctx, r, nil)
		})
		mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, r *mcp.CallToolRequest, _ text) (*mcp.CallToolResult, any, error) {
			return answer(ctx, r, nil)
		})
	} else {
		mcp.AddTool(s, &mcp.Tool{Name: "add"}, func(ctx context.Context, r *mcp.CallToolRequest, _ triple) (*mcp.CallToolResult, any, error) {
			return answer(ctx, r, nil)
		})
		mcp.AddTool(s, &mcp.Tool{Name: "mul"}, func(ctx context.Context, r *mcp.CallToolRequest, _ pair) (*mcp.CallToolResult, any, error) {
			return answer(ctx, r, nil)
		})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "same"}, func(ctx context.Context, r *mcp.CallToolRequest, _ text) (*mcp.CallToolResult, any, error) {
		return answer(ctx, r, nil)
	})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(key), Relays: []string{relayURL}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(context.Background(), s)
	}()
	stop := func() {
		srv.Close()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// cvm gen --check names the tools whose schemas changed, were added or
// were removed since the code was generated, and exits 1; it exits 0 while
// they match.
func TestGen_CheckNamesChangedTools(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	key := nostr.Generate()
	npub := nostrx.EncodeNpub(key.Public())
	c := newCLI(t)
	stop := versionedServer(t, r.URL, key, 1)
	file := filepath.Join(t.TempDir(), "client.go")
	for _, lang := range []string{"ts", "go"} { // the Go file stays
		if code, _, errOut := c.run("gen", "--lang", lang, "--relay", r.URL, "--out", file, npub); code != 0 {
			t.Fatalf("cvm gen --lang %s: exit %d: %s", lang, code, errOut)
		}
	}
	// Named after the server, which a stateless session (the second
	// contact would be one) does not tell.
	if src, err := os.ReadFile(file); err != nil || !strings.Contains(string(src), "\npackage versioned\n") {
		t.Fatalf("the package is not named after the server: %v\n%s", err, src)
	}
	if code, out, errOut := c.run("gen", "--check", file, "--relay", r.URL, npub); code != 0 || out != "" || !strings.Contains(errOut, "matches") {
		t.Fatalf("--check against the same server: exit %d, %q, %s", code, out, errOut)
	}
	stop()
	versionedServer(t, r.URL, key, 2)
	code, out, errOut := c.run("gen", "--check", file, "--relay", r.URL, npub)
	if code != exitRemote || out != "changed\tadd\nremoved\techo\nadded\tmul\n" || !strings.Contains(errOut, "no longer matches") {
		t.Fatalf("--check after the change: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	code, out, _ = c.run("gen", "--check", file, "--json", "--relay", r.URL, npub)
	var changes []clientgen.Change
	if code != exitRemote || json.Unmarshal([]byte(out), &changes) != nil || len(changes) != 3 {
		t.Fatalf("--check --json: exit %d, %s", code, out)
	}
	// A file cvm gen did not write is said to be one.
	other := filepath.Join(t.TempDir(), "other.go")
	os.WriteFile(other, []byte("package other\n"), 0o644)
	if code, _, errOut := c.run("gen", "--check", other, "--relay", r.URL, npub); code != exitLocal || !strings.Contains(errOut, "not a file cvm gen wrote") {
		t.Fatalf("--check of another file: exit %d, %s", code, errOut)
	}
}

func TestGen_Usage(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gen", "--lang", "rust", "npub1x"}, `--lang "rust": want go or ts`},
		{[]string{"gen", "--check", "f.go", "--schema", "ab"}, "--check compares a file with a server's tools"},
		{[]string{"gen", "--schema", "ab", "npub1x"}, "gen takes no arguments"},
		{[]string{"gen", "--schema", "xyz"}, `--schema "xyz": want a common schema hash`},
	} {
		code, _, errOut := c.run(tc.args...)
		if code != exitLocal || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %s; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// cvm gen --schema writes the client of a common schema's tool, as the
// servers that announce it define it.
func TestGen_FromCommonSchema(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--announce", "--common-tool", "add", "--", demoServer(t))
	p.Stderr.Await(t, 20*time.Second, `msg=announced`)
	servers := discoverJSON(t, c, func(s []discovery.Server) bool { return len(s) == 1 }, "--relay", r.URL)
	var hash string
	for _, tool := range servers[0].Tools {
		if tool.Name == "add" {
			hash = tool.SchemaHash
		}
	}
	if hash == "" {
		t.Fatalf("no schema hash announced: %+v", servers[0].Tools)
	}
	code, out, errOut := c.run("gen", "--schema", hash[:12], "--package", "adder", "--relay", r.URL)
	if code != 0 {
		t.Fatalf("cvm gen --schema: exit %d: %s", code, errOut)
	}
	recorded, err := clientgen.Recorded([]byte(out))
	if err != nil || len(recorded) != 1 || recorded["add"] != hash {
		t.Fatalf("recorded %v, %v; want add's %s", recorded, err, hash)
	}
	for _, want := range []string{"package adder", "func (c *Client) Add(ctx context.Context, in AddInput) (*AddOutput, error)", "Sum float64 `json:\"sum\"`", "the servers of common schema " + hash} {
		if !strings.Contains(out, want) {
			t.Errorf("the code lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := c.run("gen", "--schema", strings.Repeat("0", 64), "--relay", r.URL); code != exitRemote || !strings.Contains(errOut, "no server announces a verified implementation") {
		t.Fatalf("an unknown schema: exit %d, %s", code, errOut)
	}
}
