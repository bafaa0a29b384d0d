package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type gatewayHTTPReady struct {
	gatewayReady
	HTTP string `json:"http"`
	DID  string `json:"did"`
}

func TestGatewayCommand_HTTPOnly(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "gateway", "--http", "127.0.0.1:0", "--no-nostr", "--", demoServer(t))
	var ready gatewayHTTPReady
	p.ReadyLine(t, &ready)
	if !strings.HasPrefix(ready.HTTP, "http://127.0.0.1:") || !strings.HasSuffix(ready.HTTP, "/mcp") || ready.DID != "did:nostr:"+ready.Pubkey || len(ready.Relays) != 0 {
		t.Fatalf("ready line %+v", ready)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ready.HTTP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || res.IsError {
		t.Fatalf("add over HTTP: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"sum":3}` {
		t.Fatalf("add = %s", b)
	}
	cs.Close()

	var doc struct {
		ID      string `json:"id"`
		Service []struct {
			Type, ServiceEndpoint string
		} `json:"service"`
	}
	if err := json.Unmarshal([]byte(get(t, strings.TrimSuffix(ready.HTTP, "/mcp")+"/.well-known/did.json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != ready.DID || len(doc.Service) != 1 || doc.Service[0].Type != "MCPServiceV1" || doc.Service[0].ServiceEndpoint != ready.HTTP {
		t.Fatalf("DID document %+v", doc)
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, p.Stderr)
	}
}

func TestGatewayCommand_HTTPRequireAuth(t *testing.T) {
	c := newCLI(t)
	p := startCVM(t, c, "gateway", "--http", "127.0.0.1:0", "--no-nostr", "--require-auth", "--", demoServer(t))
	var ready gatewayHTTPReady
	p.ReadyLine(t, &ready)
	req, _ := http.NewRequest("POST", ready.HTTP, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Code, Message string }
	if json.NewDecoder(resp.Body).Decode(&e) != nil || resp.StatusCode != http.StatusUnauthorized || e.Code != "auth_missing" || !strings.Contains(e.Message, "DIDAuthV1") {
		t.Fatalf("unsigned request: %d %+v", resp.StatusCode, e)
	}
	p.Stop(t, syscall.SIGTERM)
}

func TestGatewayCommand_HTTPBadInput(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway", "--no-nostr", "--", "true"}, "--no-nostr serves over HTTP only: give --http ADDR too"},
		{[]string{"gateway", "--require-auth", "--", "true"}, "--require-auth is for the HTTP endpoint"},
		{[]string{"gateway", "--allow", "did:key:z6Mkabc", "--", "true"}, "can only call over --http"},
		{[]string{"gateway", "--http", "127.0.0.1:0", "--no-nostr", "--announce", "--", "true"}, "--announce publishes on Nostr"},
		{[]string{"gateway", "--auth-compat", "--", "true"}, "--auth-window and --auth-compat are for the HTTP endpoint"},
		{[]string{"gateway", "--http", "127.0.0.1:0", "--no-nostr", "--nats", "nats://127.0.0.1:1", "--", "true"}, "--nats makes replicas of a server on Nostr"},
		{[]string{"gateway", "--http", "127.0.0.1:0", "--auth-window", "0s", "--", "true"}, "--auth-window 0s: give a positive duration"},
	} {
		code, out, errOut := c.run(tc.args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		last := lines[len(lines)-1]
		if code != exitLocal || out != "" || !strings.Contains(last, tc.want) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// --auth-compat takes the identity kit's headers, which a default gateway
// refuses (they sign neither nested params nor an audience); cvm call
// --auth-compat makes them.
func TestGatewayCommand_HTTPAuthCompat(t *testing.T) {
	alice := nostr.Generate()
	c := newCLI(t)
	start := func(extra ...string) gatewayHTTPReady {
		args := append([]string{"gateway", "--http", "127.0.0.1:0", "--no-nostr", "--require-auth"}, extra...)
		p := startCVM(t, c, append(args, "--", demoServer(t))...)
		t.Cleanup(func() { p.Stop(t, syscall.SIGTERM) })
		var ready gatewayHTTPReady
		p.ReadyLine(t, &ready)
		return ready
	}
	strict, compat := start(), start("--auth-compat", "--auth-window", "10m", "--data", t.TempDir())
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	connect := func(url string) error {
		hc := &http.Client{Transport: &didauth.Transport{Signer: did.NostrSigner(alice), Mode: didauth.Compat}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err == nil {
			cs.Close()
		}
		return err
	}
	if err := connect(compat.HTTP); err != nil {
		t.Fatalf("kit headers on --auth-compat: %v", err)
	}
	if err := connect(strict.HTTP); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("kit headers on a default gateway: %v, want 401", err)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if code, _, errOut := c.run("keygen", "--out", keyFile); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	if code, out, errOut := c.run("call", compat.HTTP, "add", "a=1", "b=2", "--key", keyFile, "--auth-compat"); code != 0 || out != `{"sum":3}`+"\n" {
		t.Fatalf("cvm call --auth-compat: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := c.run("call", strict.HTTP, "add", "a=1", "b=2", "--key", keyFile, "--auth-compat"); code == 0 || !strings.Contains(errOut, "401") && !strings.Contains(errOut, "Unauthorized") {
		t.Fatalf("cvm call --auth-compat on a default gateway: %d %q", code, errOut)
	}
}

// A client signing with its Nostr key (as did:nostr) is served when --allow
// names that key by npub; another key is refused with 403.
func TestGatewayCommand_HTTPSignedAndAllowed(t *testing.T) {
	alice, mallory := nostr.Generate(), nostr.Generate()
	c := newCLI(t)
	p := startCVM(t, c, "gateway", "--http", "127.0.0.1:0", "--no-nostr", "--allow", nostrx.EncodeNpub(alice.Public()), "--inject-client-pubkey", "--", demoServer(t))
	var ready gatewayHTTPReady
	p.ReadyLine(t, &ready)
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	connect := func(sk nostr.SecretKey) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: &didauth.Transport{Signer: did.NostrSigner(sk)}}
		return mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ready.HTTP, HTTPClient: hc}, nil)
	}
	cs, err := connect(alice)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || res.IsError {
		t.Fatalf("signed call: %v %+v", err, res)
	}
	cs.Close()
	if _, err := connect(mallory); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("a key not in --allow: %v, want 403 Forbidden", err)
	}
	p.Stop(t, syscall.SIGTERM)
}

// cvm call on an http:// server pays a priced tool through the quotation
// flow (nip10/quote, pay, nip10/confirm, the call naming its quotation),
// within --max-sats, and signs as the identity's did:nostr or --did-key.
func TestPayCLI_CallOverHTTPThroughQuotation(t *testing.T) {
	w := newHTTPPayWorld(t, "tool:add=5")
	ready, aliceWallet, dir := w.ready, w.clientFile, w.dir
	balances := func() (int64, int64) { return w.balances(t) }

	c := newCLI(t)
	code, out, errOut := c.run("tools", ready.HTTP)
	if code != 0 || !strings.Contains(out, "add") || !strings.Contains(out, "5 sats") {
		t.Fatalf("cvm tools over HTTP: %d %q %q", code, out, errOut)
	}
	code, out, errOut = c.run("call", ready.HTTP, "add", "a=1", "b=2", "--wallet-file", aliceWallet, "--max-sats", "10", "--yes")
	if code != 0 || out != `{"sum":3}`+"\n" || !strings.Contains(errOut, "paid 5 sats") {
		t.Fatalf("paid call over HTTP: code %d, %q, %q", code, out, errOut)
	}
	if a, s := balances(); a != 95 || s != 5 {
		t.Fatalf("balances alice %d srv %d, want 95 and 5", a, s)
	}
	// Another call is another quotation, paid again; from another DID.
	keyFile := filepath.Join(dir, "ed.key")
	k, _ := did.GenerateKey(did.Ed25519)
	if err := did.WriteKeyFile(keyFile, k, false); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = c.run("call", ready.HTTP, "add", "a=2", "b=2", "--did-key", keyFile, "--wallet-file", aliceWallet, "--max-sats", "10", "--yes")
	if code != 0 || out != `{"sum":4}`+"\n" {
		t.Fatalf("paid call signed with --did-key: code %d, %q, %q", code, out, errOut)
	}
	if a, s := balances(); a != 90 || s != 10 {
		t.Fatalf("balances alice %d srv %d, want 90 and 10", a, s)
	}
	// Over the cap, or without one: nothing paid, exit 5 saying what to do.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-sats", "3"}, "more than --max-sats"},
		{nil, "give --max-sats 5"},
	} {
		code, out, errOut = c.run(append([]string{"call", ready.HTTP, "add", "a=1", "b=1", "--wallet-file", aliceWallet, "--yes"}, tc.args...)...)
		if code != exitPayment || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, %q, %q; want 5 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if a, s := balances(); a != 90 || s != 10 {
		t.Fatalf("refused payments moved money: alice %d srv %d", a, s)
	}
}

// httpPayWorld is a fake ledger shared by files and a cvm gateway serving
// the demo server over HTTP only, with a price, paid to "srv".
type httpPayWorld struct {
	payWorld
	ready gatewayHTTPReady
	dir   string
}

func newHTTPPayWorld(t *testing.T, price string) *httpPayWorld {
	t.Helper()
	return newHTTPPayWorldOf(t, newCLI(t), "--price", price)
}

// newHTTPPayWorldOf is newHTTPPayWorld with a gateway that c starts with
// args (a price, and what else it needs).
func newHTTPPayWorldOf(t *testing.T, c *cli, args ...string) *httpPayWorld {
	t.Helper()
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.json")
	w := &httpPayWorld{dir: dir}
	w.ledger = payments.OpenLedger(ledgerPath)
	if err := w.ledger.Fund(context.Background(), "alice", 100); err != nil {
		t.Fatal(err)
	}
	srvWallet := writeSecret(t, dir, "srv.wallet", "fake://srv?ledger="+ledgerPath)
	w.clientFile = writeSecret(t, dir, "alice.wallet", "fake://alice?ledger="+ledgerPath)
	args = append([]string{"gateway", "--http", "127.0.0.1:0", "--no-nostr", "--wallet-file", srvWallet}, args...)
	w.gateway = startCVM(t, c, append(args, "--", demoServer(t))...)
	w.gateway.ReadyLine(t, &w.ready)
	return w
}

// cvm proxy on an http:// server: the host lists the tools, calls the
// priced one, is asked (elicitation) and accepts: the proxy buys the
// quotation and the call runs, paid once; declined, nothing is paid.
func TestPayProxy_OverHTTPThroughQuotation(t *testing.T) {
	w := newHTTPPayWorld(t, "tool:add=10")
	p := startCVM(t, newCLI(t), "proxy", w.ready.HTTP, "--wallet-file", w.clientFile, "--max-sats", "10")
	action := "accept"
	var asked []string
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return &mcp.ElicitResult{Action: action}, nil
	}})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(p.Stdout), Writer: p.Stdin}, nil)
	if err != nil {
		t.Fatalf("connect to the proxy: %v; stderr: %s", err, p.Stderr)
	}
	defer func() { cs.Close(); p.Wait(t) }()
	// Called before any tools/list: the server's -32030 makes the proxy
	// buy the quotation and send the call again.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || res.IsError {
		t.Fatalf("paid call through the proxy: %v %+v; stderr %s", err, res, p.Stderr)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("alice %d srv %d, want 90 and 10", a, s)
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "10 sats") {
		t.Fatalf("the host was asked %q", asked)
	}
	action = "decline"
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodePaymentDeclined {
		t.Fatalf("declined: %v", err)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("after decline: alice %d srv %d", a, s)
	}
}

// cvm call signs its requests (DIDAuthV1) and still works against a plain
// MCP server over streamable HTTP that knows nothing of NIP-10 (the seed's
// test case 5, extended client against a plain server).
func TestCallCommand_HTTPPlainServer(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	var sawAuth atomic.Bool
	mcp.AddTool(s, &mcp.Tool{Name: "hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Authorization"), "DIDAuthV1 ") {
			sawAuth.Store(true)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := newCLI(t)
	code, out, errOut := c.run("call", srv.URL, "hello")
	if code != 0 || out != "hello\n" {
		t.Fatalf("cvm call on a plain HTTP server: %d %q %q", code, out, errOut)
	}
	if !sawAuth.Load() {
		t.Fatal("cvm call did not sign its requests")
	}
}

// --allow takes DIDs: did:nostr:<hex> is that key on both transports; a
// did:key serves only over HTTP, and an allow-list of such DIDs alone
// closes Nostr to everyone but --public.
func TestGatewayAccess_AllowTakesDIDs(t *testing.T) {
	a := &app{log: slog.New(slog.DiscardHandler)}
	alice, bob := nostr.Generate().Public(), nostr.Generate().Public()
	allowed, _, err := (&gatewayCmd{app: a, gf: gatewayFlags{httpAddr: "127.0.0.1:0", allow: []string{"did:nostr:" + alice.Hex(), nostrx.EncodeNpub(bob), "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"}}}).access()
	if err != nil || len(allowed) != 2 || allowed[0] != alice || allowed[1] != bob {
		t.Fatalf("allowed %v, %v", allowed, err)
	}
	allowed, _, err = (&gatewayCmd{app: a, gf: gatewayFlags{httpAddr: "127.0.0.1:0", allow: []string{"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"}}}).access()
	if err != nil || len(allowed) != 1 || allowed[0] != (nostr.PubKey{}) {
		t.Fatalf("only a did:key allowed: Nostr allow-list %v, %v; want the unspendable zero key", allowed, err)
	}
	if _, _, err := (&gatewayCmd{app: a, gf: gatewayFlags{allow: []string{"did:nostr:zz"}}}).access(); err == nil {
		t.Fatal("a malformed did:nostr was accepted")
	}
}
