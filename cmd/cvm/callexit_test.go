package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// gatedDemo serves the demo server on r, its add announced as a common
// tool at 10 sats and paid for before it runs (CEP-8, the fake payment
// method).
func gatedDemo(t *testing.T, r *relay.Server) nostr.PubKey {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL},
		Info: contextvm.ServerInfo{Name: "Gated"}, Announce: true, CommonTools: []string{"add"},
		Prices: []contextvm.Price{{Capability: "tool:add", Amount: "10"}},
		Gate:   cep8.NewGate(cep8.Options{Processors: []payments.Processor{&payments.FakeProcessor{Ledger: payments.NewLedger(nil), Payee: "srv"}}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), demoserver.New())
	t.Cleanup(func() { srv.Close() })
	return srv.PublicKey()
}

// cvm call's exit status tells what went wrong, each class of failure
// its own, through the binary as scripts run it; --extract prints what
// its path selects and --raw the result alone.
func TestCallExitStatuses(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	r := relaytest.Start(t, relay.Options{})
	gated := nostrx.EncodeNpub(gatedDemo(t, r))
	nobody := nostrx.EncodeNpub(nostr.Generate().Public())
	c := newCLI(t)
	for _, tc := range []struct {
		name   string
		args   []string // after call; --relay relayURL is added unless there is one
		code   int
		stdout string // exactly
		stderr string // a substring
	}{
		{"extract a number", []string{npub, "add", "a=2", "b=3", "--extract", "structuredContent.sum"}, exitOK, "5\n", ""},
		{"extract a string, as it is", []string{npub, "echo", "text=a \"b\"", "--extract", "content[-1].text"}, exitOK, "a \"b\"\n", ""},
		{"extract a string with --json", []string{npub, "echo", "text=hi", "--extract", "content[0].text", "--json"}, exitOK, `"hi"` + "\n", ""},
		{"extract an object", []string{npub, "add", "a=2", "b=3", "--extract", "structuredContent"}, exitOK, `{"sum":5}` + "\n", ""},
		{"the tool's error, printed", []string{npub, "time", "zone=Nowhere/Atlantis", "--extract", "content[0].text"}, exitToolError,
			`unknown time zone "Nowhere/Atlantis": use an IANA name such as Europe/Paris` + "\n", "tool time reported an error"},
		{"the tool's error, whatever the path", []string{npub, "time", "zone=Nowhere/Atlantis", "--extract", "structuredContent.nope"}, exitToolError, "", "tool time reported an error"},
		{"arguments that do not fit", []string{npub, "add", "a=two", "b=1"}, exitUsage, "", `argument a: "two" is not a number`},
		{"a path that is none", []string{npub, "add", "a=1", "b=2", "--extract", "content[x]"}, exitUsage, "", `--extract "content[x]": at 8: [x]: want an index`},
		{"--raw and --extract", []string{npub, "add", "a=1", "b=2", "--raw", "--extract", "isError"}, exitUsage, "", "none of the others can be"},
		{"--stream and --raw", []string{npub, "count", "n=1", "--stream", "--raw"}, exitUsage, "", "give one of them"},
		{"a JSON-RPC error", []string{npub, "refuse"}, exitProtocol, "", "refused on principle (code -32602)"},
		{"no such tool", []string{npub, "nosuch"}, exitProtocol, "", `the server has no tool "nosuch"`},
		{"no relay", []string{npub, "add", "a=1", "b=2", "--relay", "ws://127.0.0.1:1", "--timeout", "1s"}, exitTransport, "", "no relay answered within 1s"},
		{"no server answers", []string{nobody, "add", "a=1", "b=2", "--stateless", "--timeout", "1s"}, exitTransport, "", "is " + nobody + " running"},
		{"no HTTP server", []string{"http://127.0.0.1:1/mcp", "add", "a=1", "b=2", "--timeout", "5s"}, exitTransport, "", "connection refused"},
		{"not paid", []string{gated, "add", "a=1", "b=2", "--relay", r.URL}, exitPayment, "", "the call costs 10 sats; give --max-sats 10"},
		{"a path that selects nothing", []string{npub, "add", "a=2", "b=3", "--extract", "structuredContent.nope"}, exitNoMatch, "",
			"--extract structuredContent.nope: structuredContent has no nope (it has: sum); see the whole result with --raw"},
		{"an index past the end", []string{npub, "echo", "text=hi", "--extract", "content[1]"}, exitNoMatch, "", "content has 1 element(s): [1] selects nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"call"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--relay") {
				args = append(args, "--relay", relayURL)
			}
			code, out, errOut := runCVM(t, c, args...)
			if code != tc.code || out != tc.stdout || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("code %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tc.code, tc.stdout, tc.stderr)
			}
			if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != exitOK && (strings.Count(errOut, "cvm: ") != 1 || !strings.HasPrefix(lines[len(lines)-1], "cvm: ")) {
				t.Errorf("a failure should explain itself in one line, the last, got:\n%s", errOut)
			}
		})
	}
}

// --raw prints the result alone, one line of JSON.
func TestCall_Raw(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	c := newCLI(t)
	code, out, errOut := runCVM(t, c, "call", npub, "add", "a=2", "b=3", "--raw", "--relay", relayURL)
	var res struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]int   `json:"structuredContent"`
	}
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || json.Unmarshal([]byte(out), &res) != nil ||
		res.StructuredContent["sum"] != 5 || len(res.Content) != 1 {
		t.Fatalf("code %d, stdout %q, stderr %q; want the result on one line", code, out, errOut)
	}
}

// cvm call --schema: --extract and --raw apply to the result, not to the
// provider and attempts --json adds; a payment not made exits 5 with the
// advice a call to one server gets, and is not the server's failure.
func TestCallSchema_ExtractAndPayment(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	free := announcedDemo(t, r, "Free", nostr.Generate())
	gated := gatedDemo(t, r)
	c := newCLI(t)
	var hash string
	testwait.Eventually(t, 20*time.Second, "both servers announced with add", func() bool {
		code, out, errOut := c.run("discover", "--relay", r.URL, "--json", "--timeout", "5s")
		if code != 0 {
			t.Fatalf("discover: %d %s", code, errOut)
		}
		var servers []rankedJSON
		if json.Unmarshal([]byte(out), &servers) != nil || len(servers) != 2 || len(servers[0].Tools) == 0 || len(servers[1].Tools) == 0 {
			return false
		}
		hash = servers[0].Tools[0].SchemaHash
		return true
	})
	call := func(trust nostr.PubKey, args ...string) (int, string, string) {
		return runCVM(t, c, append([]string{"call", "--schema", hash, "add", "a=1", "b=2", "--relay", r.URL, "--trust", nostrx.EncodeNpub(trust), "--timeout", "5s"}, args...)...)
	}
	if code, out, errOut := call(free, "--extract", "structuredContent.sum", "--json"); code != 0 || out != "3\n" || !strings.Contains(errOut, "answered by Free") {
		t.Errorf("--extract: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := call(free, "--raw", "--json"); code != 0 || !strings.HasPrefix(out, `{"content":`) || strings.Contains(out, "provider") {
		t.Errorf("--raw: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut := call(gated)
	if code != exitPayment || out != "" || strings.Contains(errOut, "level=") || !strings.Contains(errOut, "Gated ("+nostrx.EncodeNpub(gated)[:20]+"…) asked 10 sats: not paid") ||
		!strings.HasSuffix(errOut, "cvm: the call costs 10 sats; give --max-sats 10 (or set payments.max-sats) and a wallet (--wallet-file or $CVM_WALLET) to pay for it\n") {
		t.Errorf("not paid: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	hist := discovery.OpenHistory(filepath.Join(c.env["XDG_CACHE_HOME"], "cvm", "history.json"))
	if rec := hist.Get(gated); len(rec.Calls) != 0 {
		t.Errorf("the declined payment is in Gated's history: %+v", rec)
	}
	if rec := hist.Get(free); len(rec.Calls) != 2 {
		t.Errorf("Free's history %+v; want its 2 calls", rec)
	}
}
