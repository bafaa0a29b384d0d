package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testDIDHeader is the test seam's stand-in for DIDAuthV1: it names the
// caller's DID unverified. Only these tests use it.
const testDIDHeader = "X-Test-Did"

type testCallerKey struct{}

// testAuth is an auth middleware for tests: the DID in testDIDHeader, if
// any, is the caller; "bad" is refused with 401, as a bad signature is.
func testAuth(required bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			did := r.Header.Get(testDIDHeader)
			switch {
			case did == "bad":
				gateway.WriteHTTPError(w, http.StatusUnauthorized, "bad_signature", "the signature does not verify")
				return
			case did == "" && required:
				gateway.WriteHTTPError(w, http.StatusUnauthorized, "missing_credentials", "sign the request")
				return
			case did != "":
				r = r.WithContext(context.WithValue(r.Context(), testCallerKey{}, did))
			}
			next.ServeHTTP(w, r)
		})
	}
}

func testCaller(ctx context.Context) (string, bool) {
	did, ok := ctx.Value(testCallerKey{}).(string)
	return did, ok
}

// didTransport adds testDIDHeader to every request.
type didTransport struct{ did string }

func (d didTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if d.did != "" {
		r.Header.Set(testDIDHeader, d.did)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// httpBench is a gateway serving only HTTP, on an in-process upstream.
type httpBench struct {
	t   *testing.T
	gw  *gateway.Gateway
	srv *httptest.Server
	url string
}

func newHTTPBench(t *testing.T, opts gateway.Options, hopts gateway.HTTPOptions) *httpBench {
	t.Helper()
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	if opts.Upstream == nil {
		opts.Upstream = gateway.InProcess(testServer())
	}
	opts.NoNostr = true
	gw, err := gateway.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		gw.Serve(context.Background())
	}()
	srv := httptest.NewServer(gw.HTTPHandler(hopts))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		gw.Close()
		srv.Close()
		<-served
	})
	return &httpBench{t: t, gw: gw, srv: srv, url: srv.URL + gateway.MCPPath}
}

func (b *httpBench) tryConnect(did string) (*mcp.ClientSession, error) {
	ctx, cancel := testwait.Context(b.t, patience)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: b.url, HTTPClient: &http.Client{Transport: didTransport{did}}, DisableStandaloneSSE: true}
	cs, err := newClient(nil).Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	b.t.Cleanup(func() { cs.Close() })
	return cs, nil
}

func (b *httpBench) connect(did string) *mcp.ClientSession {
	b.t.Helper()
	cs, err := b.tryConnect(did)
	if err != nil {
		b.t.Fatal(err)
	}
	return cs
}

// post sends one raw JSON-RPC body and returns the status and body.
func (b *httpBench) post(did, session, body string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if did != "" {
		req.Header.Set(testDIDHeader, did)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func TestHTTPServe_FreeCallWithoutAuth(t *testing.T) {
	b := newHTTPBench(t, gateway.Options{}, gateway.HTTPOptions{})
	cs := b.connect("")
	if got := call(t, cs, "echo", map[string]any{"text": "over http"}); got != "over http" {
		t.Fatalf("echo = %q", got)
	}
	if got := cs.InitializeResult().Instructions; got != testInstructions {
		t.Fatalf("instructions = %q: the upstream's initialize result should pass through", got)
	}
	if n := b.gw.Sessions(); n != 1 {
		t.Fatalf("sessions = %d, want 1", n)
	}
	cs.Close()
	testwait.Eventually(t, patience, "the session to end after DELETE", func() bool { return b.gw.Sessions() == 0 })
}

func TestHTTPServe_SharedMode(t *testing.T) {
	b := newHTTPBench(t, gateway.Options{Mode: gateway.Shared}, gateway.HTTPOptions{})
	a, c := b.connect(""), b.connect("")
	if call(t, a, "session", nil) != call(t, c, "session", nil) {
		t.Fatal("shared mode: two HTTP clients should share one upstream session")
	}
}

func TestHTTPServe_MaxSessionsCountsHTTPSessions(t *testing.T) {
	b := newHTTPBench(t, gateway.Options{MaxSessions: 1, SessionGrace: time.Minute}, gateway.HTTPOptions{})
	b.connect("")
	_, err := b.tryConnect("")
	if err == nil {
		t.Fatal("a second session beyond --max-sessions 1 was accepted")
	}
	if !strings.Contains(err.Error(), "busy") {
		t.Fatalf("refusal = %v, want the gateway's busy error", err)
	}
	if d, ok := contextvm.RetryAfter(err); !ok || d <= 0 {
		t.Logf("no retry_after in %v (the go-sdk client may hide the error data)", err)
	}
}

func TestHTTPServe_RequireAuthAndAllow(t *testing.T) {
	allowed := "did:nostr:" + strings.Repeat("ab", 32)
	b := newHTTPBench(t, gateway.Options{}, gateway.HTTPOptions{
		Auth:    testAuth(true),
		Caller:  testCaller,
		Allowed: func(did string) bool { return did == allowed },
	})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		did    string
		status int
		code   string
	}{
		{"", http.StatusUnauthorized, "missing_credentials"},
		{"bad", http.StatusUnauthorized, "bad_signature"},
		{"did:key:z6Mkother", http.StatusForbidden, "forbidden"},
	} {
		status, body := b.post(c.did, "", init)
		var e struct{ Code, Message string }
		if err := json.Unmarshal([]byte(body), &e); err != nil || status != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("did %q: %d %s, want %d with code %q", c.did, status, body, c.status, c.code)
		}
	}
	if n := b.gw.Sessions(); n != 0 {
		t.Fatalf("refused callers opened %d sessions", n)
	}
	cs := b.connect(allowed)
	if got := call(t, cs, "echo", map[string]any{"text": "hi"}); got != "hi" {
		t.Fatalf("echo = %q", got)
	}
}

func TestHTTPServe_SessionBelongsToItsCaller(t *testing.T) {
	b := newHTTPBench(t, gateway.Options{}, gateway.HTTPOptions{Auth: testAuth(false), Caller: testCaller})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", b.url, strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(testDIDHeader, "did:key:z6Mkalice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if status, body := b.post("did:key:z6Mkmallory", sid, list); status != http.StatusNotFound || !strings.Contains(body, "session_not_found") {
		t.Fatalf("another DID on alice's session: %d %s, want 404 session_not_found", status, body)
	}
	if status, body := b.post("did:key:z6Mkalice", sid, list); status != 200 || !strings.Contains(body, "echo") {
		t.Fatalf("alice on her session: %d %s", status, body)
	}
}

func TestHTTPServe_NoSessionWithoutInitialize(t *testing.T) {
	b := newHTTPBench(t, gateway.Options{}, gateway.HTTPOptions{})
	status, body := b.post("", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if status != http.StatusBadRequest || !strings.Contains(body, "missing_session") {
		t.Fatalf("tools/list without a session: %d %s", status, body)
	}
	status, body = b.post("", "nonexistent", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if status != http.StatusNotFound || !strings.Contains(body, "session_not_found") {
		t.Fatalf("unknown session: %d %s", status, body)
	}
}

func TestHTTPServe_DIDDocument(t *testing.T) {
	doc := json.RawMessage(`{"id":"did:nostr:00"}`)
	b := newHTTPBench(t, gateway.Options{}, gateway.HTTPOptions{DIDDocument: doc})
	resp, err := http.Get(b.srv.URL + gateway.DIDDocumentPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != string(doc) {
		t.Fatalf("did.json: %d %s", resp.StatusCode, body)
	}
}
