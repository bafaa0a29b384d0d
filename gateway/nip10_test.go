package gateway_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The seed's (NIP-10) five test cases, end to end over HTTP through the
// gateway: an upstream with a free tool and a priced one, DIDAuthV1
// (package didauth) signed by the clients and verified by the gateway,
// quotations paid over a simulated Lightning network.

// paidUpstream has a free tool "free" and a tool "translate" priced at
// 10 sats; calls counts the translate calls that ran, and lastDID the
// caller the upstream was told of.
type paidUpstream struct {
	calls   atomic.Int64
	lastDID atomic.Value
}

func (u *paidUpstream) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "paid-upstream", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "free"}, func(_ context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		if did, ok := req.Params.Meta["clientDid"].(string); ok {
			u.lastDID.Store(did)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "free:" + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "translate"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		u.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fr:" + a.Text}}}, nil, nil
	})
	return s
}

type nip10Bench struct {
	*httpBench
	up     *paidUpstream
	net    *lnsim.Network
	client *lnsim.Wallet
}

// newNIP10Bench is a gateway with DID auth (required or not) and, if
// paid, the quotation layer.
func newNIP10Bench(t *testing.T, required, paid bool) *nip10Bench {
	t.Helper()
	up := &paidUpstream{}
	n, sw, cw := lightningWallets(t)
	v, err := didauth.NewVerifier(didauth.Options{RequireAuth: required, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hopts := gateway.HTTPOptions{Auth: v.Middleware, Caller: didauth.Caller, InjectCaller: true}
	if paid {
		desk, err := quotation.New(quotation.Options{
			Store:     durable.NewMemory(durable.Options{}),
			Processor: lightning.NewProcessor(sw, lightning.ProcessorOptions{PollMin: time.Millisecond}),
			Prices:    map[string]payments.Cap{"translate": {Capability: "tool:translate", Low: 10, High: 10, Unit: "sats"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		hopts.Payments = quotation.HTTP{Desk: desk, Caller: didauth.Caller}
	}
	b := newHTTPBench(t, gateway.Options{Upstream: gateway.InProcess(up.server())}, hopts)
	return &nip10Bench{httpBench: b, up: up, net: n, client: cw}
}

// lightningWallets is a simulated Lightning network with the server's
// wallet (empty) and the client's.
func lightningWallets(t testing.TB) (n *lnsim.Network, server, client *lnsim.Wallet) {
	t.Helper()
	n, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.AddWallet("client", 1_000_000)
	n.AddWallet("server", 0)
	server, _ = n.Wallet("server")
	client, _ = n.Wallet("client")
	return n, server, client
}

// rawSession speaks JSON-RPC over streamable HTTP by hand, as a client of
// the extension does for the methods no SDK knows.
type rawSession struct {
	t   *testing.T
	b   *httpBench
	hc  *http.Client
	sid string
	id  int
}

// signing is an HTTP client that signs as s (nil: unsigned).
func signing(s did.Signer) *http.Client {
	if s == nil {
		return http.DefaultClient
	}
	return &http.Client{Transport: &didauth.Transport{Signer: s}}
}

// connectAs opens a go-sdk client session signed as s.
func (b *nip10Bench) connectAs(t *testing.T, s did.Signer) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	cs, err := newClient(nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.url, HTTPClient: signing(s), DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func newSigner(t *testing.T) *did.KeySigner {
	t.Helper()
	s, err := did.GenerateKey(did.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (s *rawSession) do(method string, params any) (rpcReply, json.RawMessage) {
	s.t.Helper()
	s.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", s.b.url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		req.Header.Set("Mcp-Session-Id", s.sid)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, b)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		s.sid = sid
	}
	var raw []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id"`) {
				raw = []byte(data)
				break
			}
		}
	} else {
		raw, _ = io.ReadAll(resp.Body)
	}
	var r rpcReply
	if err := json.Unmarshal(raw, &r); err != nil {
		s.t.Fatalf("%s: %v in %q", method, err, raw)
	}
	return r, raw
}

func (b *nip10Bench) open(t *testing.T, signer did.Signer) (*rawSession, json.RawMessage) {
	t.Helper()
	s := &rawSession{t: t, b: b.httpBench, hc: signing(signer)}
	r, _ := s.do("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	if r.Error != nil || s.sid == "" {
		t.Fatalf("initialize: %+v, session %q", r.Error, s.sid)
	}
	return s, r.Result
}

func TestNIP10_AuthenticatedFreeCall(t *testing.T) {
	b := newNIP10Bench(t, true, true)
	signer := did.NostrSigner(nostr.Generate())
	cs := b.connectAs(t, signer)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "free", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "free:hi" {
		t.Fatalf("free call: %v %+v", err, res)
	}
	if got, _ := b.up.lastDID.Load().(string); got != signer.DID() {
		t.Fatalf("the upstream was told caller %q, want %q", got, signer.DID())
	}
	exp := cs.InitializeResult().Capabilities.Experimental["nip10"]
	want := `{"auth":["DIDAuthV1"],"payment":["quotation"]}`
	if got, _ := json.Marshal(exp); string(got) != want {
		t.Fatalf("experimental.nip10 = %s, want %s", got, want)
	}
}

func TestNIP10_InvalidSignatureRejected(t *testing.T) {
	b := newNIP10Bench(t, true, true)
	hc := &http.Client{Transport: &didauth.Transport{Signer: newSigner(t), Base: corrupting{t}}}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", b.url, strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Code, Message string }
	if json.NewDecoder(resp.Body).Decode(&e) != nil || resp.StatusCode != http.StatusUnauthorized || e.Code != didauth.CodeBadSignature {
		t.Fatalf("a badly signed request: %d %+v, want 401 %s", resp.StatusCode, e, didauth.CodeBadSignature)
	}
	if b.gw.Sessions() != 0 {
		t.Fatal("a badly signed initialize opened a session")
	}
}

// corrupting sends a signed request with one bit of its signature
// flipped: the header still decodes, the signature does not verify.
type corrupting struct{ t *testing.T }

func (c corrupting) RoundTrip(r *http.Request) (*http.Response, error) {
	cred, err := didauth.ParseHeader(r.Header.Get("Authorization"))
	if err != nil {
		c.t.Fatal(err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cred.Signature.Value, "u"))
	if err != nil {
		c.t.Fatal(err)
	}
	sig[10] ^= 1
	cred.Signature.Value = "u" + base64.RawURLEncoding.EncodeToString(sig)
	r.Header.Set("Authorization", cred.Header())
	return http.DefaultTransport.RoundTrip(r)
}

func TestNIP10_PaidCallThroughQuotationPaymentConfirmation(t *testing.T) {
	b := newNIP10Bench(t, true, true)
	s, _ := b.open(t, newSigner(t))
	list, _ := s.do("tools/list", map[string]any{})
	if !strings.Contains(string(list.Result), `"nip10/price":{"amount":10,"unit":"sats"}`) {
		t.Fatalf("tools/list does not price translate: %s", list.Result)
	}
	args := map[string]any{"text": "hello"}
	// Without a quotation: an error saying how to get one, and no call.
	r, _ := s.do("tools/call", map[string]any{"name": "translate", "arguments": args})
	if r.Error == nil || r.Error.Code != quotation.CodeQuotationRequired || !strings.Contains(r.Error.Message, "nip10/quote") {
		t.Fatalf("unpaid call: %+v", r.Error)
	}
	r, _ = s.do(quotation.MethodQuote, map[string]any{"name": "translate", "arguments": args})
	if r.Error != nil {
		t.Fatal(r.Error.Message)
	}
	var q quotation.Quote
	json.Unmarshal(r.Result, &q)
	if q.ID == "" || q.Price.Amount != 10 || q.Instructions.PMI != payments.PMILightningBolt11 || q.ExpiresAt <= time.Now().Unix() {
		t.Fatalf("quote = %s", r.Result)
	}
	pre, err := b.client.PayInvoice(context.Background(), q.Instructions.PayReq)
	if err != nil {
		t.Fatal(err)
	}
	r, _ = s.do(quotation.MethodConfirm, map[string]any{"quotation_id": q.ID, "payment_proof": pre})
	if r.Error != nil || string(r.Result) != `{"status":"confirmed"}` {
		t.Fatalf("confirm: %+v %s", r.Error, r.Result)
	}
	call := map[string]any{"name": "translate", "arguments": args, "_meta": map[string]any{quotation.MetaQuotation: q.ID}}
	// Sent where no session takes it (none, or not the caller's), the
	// paid call is refused before the quotation is spent.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": call})
	for _, sid := range []string{"", "not-a-session"} {
		req, _ := http.NewRequest("POST", b.url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := s.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("paid call with session %q: HTTP %d", sid, resp.StatusCode)
		}
	}
	// Sent with a header MCP's transport refuses, it is refused before
	// MCP reads it, and the quotation stays good for the call.
	for _, bad := range []map[string]string{
		{"Last-Event-ID": "s_1"},
		{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list", "Mcp-Name": "translate"},
	} {
		req, _ := http.NewRequest("POST", b.url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.sid)
		for k, v := range bad {
			req.Header.Set(k, v)
		}
		resp, err := s.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("paid call with %v: HTTP %d %s", bad, resp.StatusCode, msg)
		}
	}
	r, raw := s.do("tools/call", call)
	if r.Error != nil || !strings.Contains(string(r.Result), "fr:hello") {
		t.Fatalf("paid call: %s", raw)
	}
	// The quotation paid for one call.
	r, _ = s.do("tools/call", call)
	if r.Error == nil || r.Error.Code != quotation.CodeQuotationSpent {
		t.Fatalf("second call on one quotation: %+v", r.Error)
	}
	if n := b.up.calls.Load(); n != 1 {
		t.Fatalf("translate ran %d times, want 1", n)
	}
	if bal, _ := b.net.Balance("server"); bal != 10_000 {
		t.Fatalf("server received %d msat, want 10000", bal)
	}
}

func TestNIP10_FailedPaymentVerification(t *testing.T) {
	b := newNIP10Bench(t, true, true)
	s, _ := b.open(t, newSigner(t))
	args := map[string]any{"text": "hello"}
	r, _ := s.do(quotation.MethodQuote, map[string]any{"name": "translate", "arguments": args})
	var q quotation.Quote
	json.Unmarshal(r.Result, &q)
	r, _ = s.do(quotation.MethodConfirm, map[string]any{"quotation_id": q.ID, "payment_proof": strings.Repeat("42", 32)})
	if r.Error == nil || r.Error.Code != quotation.CodePaymentProofInvalid {
		t.Fatalf("a proof that does not match: %+v", r.Error)
	}
	r, _ = s.do("tools/call", map[string]any{"name": "translate", "arguments": args, "_meta": map[string]any{quotation.MetaQuotation: q.ID}})
	if r.Error == nil || r.Error.Code != quotation.CodeQuotationNotPaid {
		t.Fatalf("a call on an unconfirmed quotation: %+v", r.Error)
	}
	if n := b.up.calls.Load(); n != 0 {
		t.Fatalf("translate ran %d times unpaid", n)
	}
}

// A client that knows nothing of the extension (no DID, no quotations)
// uses a server that has it; a client of the extension (it signs) uses a
// server that has none of it.
func TestNIP10_PeerWithoutExtension(t *testing.T) {
	t.Run("plain client, extended server", func(t *testing.T) {
		b := newNIP10Bench(t, false, true)
		cs := b.connectAs(t, nil)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "free", Arguments: map[string]any{"text": "x"}})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "free:x" {
			t.Fatalf("free call: %v %+v", err, res)
		}
		_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "translate", Arguments: map[string]any{"text": "x"}})
		if err == nil || !strings.Contains(err.Error(), "nip10/quote") || rpcError(t, err).Code != quotation.CodeQuotationRequired {
			t.Fatalf("priced call from a plain client: %v", err)
		}
		if b.up.calls.Load() != 0 {
			t.Fatal("the priced tool ran unpaid")
		}
	})
	t.Run("extended client, plain server", func(t *testing.T) {
		b := &nip10Bench{httpBench: newHTTPBench(t, gateway.Options{}, gateway.HTTPOptions{})}
		cs := b.connectAs(t, did.NostrSigner(nostr.Generate()))
		if _, ok := cs.InitializeResult().Capabilities.Experimental["nip10"]; ok {
			t.Fatal("a server without the extension announces it")
		}
		if got := call(t, cs, "echo", map[string]any{"text": "signed"}); got != "signed" {
			t.Fatalf("echo = %q", got)
		}
	})
}
