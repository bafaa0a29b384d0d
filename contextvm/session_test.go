package contextvm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip19"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tap records every ContextVM event on a relay, opening the wraps it can
// with the keys it is given.
type tap struct {
	changes peertest.Notifier // of each event seen
	mu      sync.Mutex
	events  []tapped
	keys    map[nostr.PubKey]nostr.SecretKey
}

type tapped struct {
	outerKind nostr.Kind
	inner     nostr.Event
}

func newTap(t testing.TB, relayURL string, keys ...nostr.SecretKey) *tap {
	tp := &tap{keys: map[nostr.PubKey]nostr.SecretKey{}}
	for _, k := range keys {
		tp.keys[k.Public()] = k
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	sub := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage, contextvm.KindGiftWrap, contextvm.KindEphemeralGiftWrap}}, 0)
	<-sub.Ready()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for evt := range sub.Events() {
			tp.add(evt)
		}
	}()
	t.Cleanup(func() { pool.Close(); <-done })
	return tp
}

func (tp *tap) add(evt nostr.Event) {
	entry := tapped{outerKind: evt.Kind, inner: evt}
	if evt.Kind != contextvm.KindMessage {
		for pk, sk := range tp.keys {
			if inner, err := contextvm.Unwrap(context.Background(), contextvm.NewKeySigner(sk), pk, evt); err == nil {
				entry.inner = inner
				break
			}
		}
	}
	tp.mu.Lock()
	tp.events = append(tp.events, entry)
	tp.mu.Unlock()
	tp.changes.Notify()
}

// messages returns what was seen so far, decoded, in arrival order.
func (tp *tap) messages() []tapMsg {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []tapMsg
	for _, e := range tp.events {
		msgs, _, err := contextvm.DecodeContent(e.inner.Content)
		if err != nil {
			continue
		}
		for _, m := range msgs {
			tm := tapMsg{outerKind: e.outerKind, evt: e.inner}
			switch m := m.(type) {
			case *jsonrpc.Request:
				tm.method = m.Method
				tm.call = m.IsCall()
			case *jsonrpc.Response:
				tm.response = true
			}
			out = append(out, tm)
		}
	}
	return out
}

type tapMsg struct {
	outerKind nostr.Kind
	evt       nostr.Event
	method    string
	call      bool
	response  bool
}

func tagNames(tags nostr.Tags) []string {
	var out []string
	for _, t := range tags {
		out = append(out, t[0])
	}
	return out
}

// serveWatched is serve, with the sessions connected by the test rather
// than by Serve, so that it hears each session end: ended receives every
// session whose connection has closed, once the server has forgotten it.
func serveWatched(t testing.TB, opts contextvm.ServerOptions, mcpServer *mcp.Server) (srv *contextvm.Server, ended <-chan *contextvm.ServerConn) {
	t.Helper()
	ch := make(chan *contextvm.ServerConn, 64)
	srv = serveEach(t, opts, mcpServer, func(c *contextvm.ServerConn, ss *mcp.ServerSession) {
		ss.Wait()
		ch <- c
	})
	return srv, ch
}

// serveEach is serve, with each session the server accepts connected by
// the test and then handed to each, on a goroutine of its own that the
// test's end waits for.
func serveEach(t testing.TB, opts contextvm.ServerOptions, mcpServer *mcp.Server, each func(*contextvm.ServerConn, *mcp.ServerSession)) *contextvm.Server {
	t.Helper()
	if opts.Signer == nil {
		opts.Signer = contextvm.NewKeySigner(nostr.Generate())
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := srv.Accept(context.Background())
			if err != nil {
				return // the server closed
			}
			ss, err := mcpServer.Connect(context.Background(), c.Transport(), nil)
			if err != nil {
				t.Error(err)
				c.Close()
				continue
			}
			wg.Go(func() { each(c, ss) })
		}
	})
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return srv
}

// awaitEnd waits for the next session to end.
func awaitEnd(t testing.TB, ended <-chan *contextvm.ServerConn, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// The wire format matches the reference: requests carry ["p", server] and,
// on the first message of a session, the client's discovery tags; responses
// ["p", client], ["e", request] and, once per session, the server's.
func TestWireFormat(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	serverKey, clientKey := nostr.Generate(), nostr.Generate()
	tp := newTap(t, r.URL)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(serverKey), Encryption: contextvm.EncryptDisabled,
		Info: contextvm.ServerInfo{Name: "wire", About: "about", Website: "https://example.com", Picture: "https://example.com/p.png"}}, peertest.EchoServer())
	opts := contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(clientKey), Encryption: contextvm.EncryptDisabled}
	cs := peertest.Connect(t, opts)
	peertest.CallEcho(t, cs, "one")
	cs.Close()
	cs = peertest.Connect(t, opts) // a new session with the same key
	peertest.CallEcho(t, cs, "two")
	peertest.Await(t, "all messages", &tp.changes, func() bool { return len(tp.messages()) >= 10 })

	sp, cp := serverKey.Public().Hex(), clientKey.Public().Hex()
	// The relay delivers to the tap and to the server concurrently, so the
	// tap may see a response before its request: index everything first.
	msgs := tp.messages()
	byID := map[nostr.ID]tapMsg{}
	for _, m := range msgs {
		byID[m.evt.ID] = m
	}
	var inits, initResponses int
	for _, m := range msgs {
		if m.outerKind != contextvm.KindMessage {
			t.Errorf("a gift wrap in plaintext mode: kind %d", m.outerKind)
		}
		fromClient := m.evt.PubKey == clientKey.Public()
		p, _ := peertest.FirstTag(m.evt.Tags, "p")
		switch {
		case fromClient && p != sp, !fromClient && p != cp:
			t.Errorf("%s from %v addressed to %s", m.method, fromClient, p)
		case fromClient && m.method == "initialize":
			inits++
			// Encryption disabled: of the support_* flags, only CEP-22's.
			if names := tagNames(m.evt.Tags); !slices.Equal(names, []string{"p", contextvm.TagSupportOversizedTransfer, "nonce"}) {
				t.Errorf("initialize request tags %v", m.evt.Tags)
			}
		case fromClient:
			if names := tagNames(m.evt.Tags); !slices.Equal(names, []string{"p", "nonce"}) {
				t.Errorf("%s tags %v, want p and nonce", m.method, m.evt.Tags)
			}
		case m.response:
			e, ok := peertest.FirstTag(m.evt.Tags, "e")
			req, known := byID[nostr.MustIDFromHex(e)]
			if !ok || !known {
				t.Errorf("response tags %v do not reference a request", m.evt.Tags)
				continue
			}
			names := tagNames(m.evt.Tags)
			if req.method == "initialize" {
				initResponses++
				want := []string{"p", "e", "name", "about", "website", "picture", contextvm.TagSupportOversizedTransfer, "nonce"}
				if !slices.Equal(names, want) {
					t.Errorf("first response of a session has tags %v, want %v", names, want)
				}
			} else if !slices.Equal(names, []string{"p", "e", "nonce"}) {
				t.Errorf("later response to %s has tags %v, want p, e and nonce only", req.method, names)
			}
		}
	}
	if inits != 2 || initResponses != 2 {
		t.Errorf("saw %d initialize requests and %d responses, want 2 and 2 (discovery tags once per session)", inits, initResponses)
	}
}

// The go-sdk client's default protocol starts with server/discover; it must
// never reach the wire.
func TestServerDiscoverStaysLocal(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	tp := newTap(t, r.URL)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, peertest.EchoServer())
	tr, err := contextvm.NewClientTransport(contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "default-options"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != contextvm.ProtocolVersion {
		t.Errorf("negotiated %s", v)
	}
	peertest.CallEcho(t, cs, "x")
	for _, m := range tp.messages() {
		if m.method == "server/discover" {
			t.Fatal("server/discover reached the relay")
		}
	}
}

func TestStatelessClient(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	serverKey := nostr.Generate()
	tp := newTap(t, r.URL, serverKey)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(serverKey), Info: contextvm.ServerInfo{Name: "stateless"}}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Stateless: true})
	if got := cs.InitializeResult().ServerInfo.Name; got != "Emulated-Stateless-Server" {
		t.Errorf("stateless initialize answered by %q, want the local emulation", got)
	}
	if got := peertest.CallEcho(t, cs, "no handshake"); got != "no handshake" {
		t.Fatalf("echo = %q", got)
	}
	first := true
	for _, m := range tp.messages() {
		if m.method == "initialize" || m.method == "notifications/initialized" {
			t.Errorf("%s went over the wire in stateless mode", m.method)
		}
		if m.call && first {
			first = false
			if !slices.Contains(tagNames(m.evt.Tags), contextvm.TagSupportEncryption) {
				t.Errorf("first request of a stateless session lacks discovery tags: %v", m.evt.Tags)
			}
		}
	}
}

// A session the server began for a request without initialize says so;
// one its client began with initialize does not: the gateway serves the
// two differently.
func TestServerConn_Stateless(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	accepted := make(chan *contextvm.ServerConn, 2)
	srv := serveEach(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer(), func(c *contextvm.ServerConn, _ *mcp.ServerSession) {
		accepted <- c
	})
	for _, stateless := range []bool{true, false} {
		cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Stateless: stateless})
		peertest.CallEcho(t, cs, "hi")
		select {
		case c := <-accepted:
			if c.Stateless() != stateless {
				t.Errorf("a session of a client with Stateless %v reports Stateless %v", stateless, c.Stateless())
			}
		case <-time.After(testwait.Timeout(10 * time.Second)):
			t.Fatal("no session accepted")
		}
	}
}

func TestNprofileRelayHints(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer())
	nprofile := nip19.EncodeNprofile(srv.PublicKey(), []string{r.URL})
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: nprofile}) // no Relays: the hint is enough
	if got := peertest.CallEcho(t, cs, "hinted"); got != "hinted" {
		t.Fatalf("echo = %q", got)
	}
}

// A client that reconnects with the same key in persistent-only mode must
// get 1059 wraps: what it supports is learned afresh, not OR-ed forever
// (the reference keeps answering 21059 and the client hangs).
func TestCapabilitiesAreRelearnedPerSession(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer())
	key := contextvm.NewKeySigner(nostr.Generate())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: key, GiftWrap: contextvm.WrapOptional})
	peertest.CallEcho(t, cs, "ephemeral ok")
	cs.Close()
	cs = peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: key, GiftWrap: contextvm.WrapPersistent, RequestTimeout: testwait.Timeout(5 * time.Second)})
	if got := peertest.CallEcho(t, cs, "persistent ok"); got != "persistent ok" {
		t.Fatalf("echo = %q", got)
	}
}

func TestEncryptionRequiredServerAnswersPlaintext(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptRequired}, peertest.EchoServer())
	tr, _ := contextvm.NewClientTransport(contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, RequestTimeout: testwait.Timeout(30 * time.Second)})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "plain"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodeEncryptionRequired {
		t.Fatalf("err = %v, want a JSON-RPC error %d", err, contextvm.CodeEncryptionRequired)
	}
	if time.Since(start) > testwait.Timeout(5*time.Second) {
		t.Errorf("refusal took %s; it should be an answer, not a timeout", time.Since(start))
	}
}

func TestOptionalClientReachesDisabledServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptOptional})
	if got := peertest.CallEcho(t, cs, "fell back"); got != "fell back" {
		t.Fatalf("echo = %q", got)
	}
}

// A stateless client's first request on the wire is the tools/call itself,
// gift-wrapped (nothing said the server has encryption disabled). The
// server refuses the wrap without opening it, so it ran nothing: the client
// sends the call again in plaintext at once rather than failing it with
// the refusal.
func TestOptionalClientCallsDisabledServerFirst(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := mcp.NewServer(&mcp.Implementation{Name: "count"}, nil)
	var runs atomic.Int32
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		n := runs.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil, nil
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, s)
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptOptional, Stateless: true})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count"})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "1" || runs.Load() != 1 {
		t.Fatalf("result %q after %d runs; want the first and only run", got, runs.Load())
	}
}

func TestServerNotListening(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	nobody := nostr.Generate().Public()
	tr, _ := contextvm.NewClientTransport(contextvm.ClientOptions{Server: nobody.Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, RequestTimeout: 500 * time.Millisecond})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(ctx, tr, nil)
	if err == nil || !containsAll(err.Error(), "not listening", nostrx.EncodeNpub(nobody)) {
		t.Fatalf("err = %v, want a clear 'not listening' error naming the server", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestInjectClientPubkey(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := mcp.NewServer(&mcp.Implementation{Name: "meta"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "meta"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		pk, _ := req.Params.GetMeta()["clientPubkey"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: pk}}}, nil, nil
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, InjectClientPubkey: true}, s)
	key := nostr.Generate()
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(key)})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "meta"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != key.Public().Hex() {
		t.Fatalf("_meta.clientPubkey = %q, want %s", got, key.Public().Hex())
	}
}

// Sessions are bounded, and a full table evicts no session with a request
// in flight or a recent message: the newcomer is refused with busy and a
// retry_after, and the client transport tries again when told, so that it
// gets in once a session has been quiet for the grace period.
func TestFullSessionTableEvictsOnlyQuietSessions(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	release, started := make(chan struct{}), make(chan struct{}, 4)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, MaxSessions: 1, SessionGrace: 300 * time.Millisecond},
		peertest.SlowServer(release, started))
	first := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	result := make(chan error, 1)
	go func() {
		res, err := first.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait"})
		if err == nil && res.Content[0].(*mcp.TextContent).Text != "released" {
			err = errors.New("wrong result")
		}
		result <- err
	}()
	<-started

	// A client that will not wait for a retry is refused at once.
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	_, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "impatient", Version: "1"}, nil),
		contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, RequestTimeout: time.Second})
	if wait, ok := contextvm.RetryAfter(err); !ok || wait < time.Second {
		t.Fatalf("a newcomer while the only session has a call in flight: %v; want busy with a retry after 1s or more", err)
	}

	close(release)
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("the call in flight: %v", err)
		}
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the call in flight was never answered")
	}
	// Once the first session has been quiet for 300 ms, a newcomer gets
	// its place: the transport retries the busy initialize by itself.
	second := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	peertest.CallEcho(t, second, "in")
	// And the first client gets back in the same way, once the second
	// has been quiet.
	if got := peertest.CallEcho(t, first, "back"); got != "back" {
		t.Fatalf("after eviction: %q", got)
	}
}

func TestIdleSessionsExpire(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv, ended := serveWatched(t, contextvm.ServerOptions{Relays: []string{r.URL}, IdleTimeout: time.Second}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	peertest.CallEcho(t, cs, "before")
	awaitEnd(t, ended, "the idle session to close")
	if n := srv.Sessions(); n != 0 {
		t.Fatalf("%d sessions after the only one closed", n)
	}
	if got := peertest.CallEcho(t, cs, "after"); got != "after" {
		t.Fatalf("after expiry: %q", got)
	}
}

func TestClientWithTheServersKeyIsRefused(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	sk := nostr.Generate()
	srv := peertest.Serve(t, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(sk), Relays: []string{r.URL}}, peertest.EchoServer())
	ctx, cancel := testwait.Context(t, 5*time.Second)
	defer cancel()
	_, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil), contextvm.ClientOptions{
		Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(sk),
	})
	if !errors.Is(err, contextvm.ErrClientIsServer) {
		t.Fatalf("connect with the server's key: %v; want ErrClientIsServer", err)
	}
}

// New sessions are bounded per key (a quarter of the overall rate and
// burst) and overall; a start over either limit is answered busy, with
// when to retry, and costs the session nothing.
func TestNewSessionRateLimits(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	// Overall one every 2.5 s, burst 4; a key: one every 10 s, burst 1.
	// Slow refills, so that a loaded machine taking a second per round
	// trip does not refill a bucket between two answers.
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, SessionRate: 0.4, SessionBurst: 4}, peertest.EchoServer())
	me := srv.PublicKey()
	id := 0
	answer := func(p *peertest.RawPeer) (retry time.Duration, busy bool) {
		t.Helper()
		id++ // no two events alike
		p.Publish(p.Message(me, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, id)))
		evt, ok := p.Next(10 * time.Second)
		if !ok {
			t.Fatal("no answer to initialize")
		}
		var resp struct {
			Error *jsonrpc.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(evt.Content), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Error == nil {
			return 0, false
		}
		retry, ok = contextvm.RetryAfter(resp.Error)
		if !ok {
			t.Fatalf("refused without a retry_after: %s", evt.Content)
		}
		return retry, true
	}
	a := peertest.NewRawPeer(t, r.URL)
	if _, busy := answer(a); busy {
		t.Fatal("a key's first session refused")
	}
	if retry, busy := answer(a); !busy || retry > 10*time.Second {
		t.Fatalf("a key's second session at once: busy %v, retry %v; want busy within 10s", busy, retry)
	}
	// Three other keys take the rest of the overall burst; a fifth key is
	// refused although it has started nothing.
	for range 3 {
		if _, busy := answer(peertest.NewRawPeer(t, r.URL)); busy {
			t.Fatal("a new key within the overall burst refused")
		}
	}
	if retry, busy := answer(peertest.NewRawPeer(t, r.URL)); !busy || retry > 2500*time.Millisecond {
		t.Fatalf("a fifth key beyond the overall burst: busy %v, retry %v; want busy within 2.5s", busy, retry)
	}
}

// A stateless connection under the key of a session that has sent the
// server's discovery tags already, to another connection, hears them on
// its first answer: it introduced itself with its own.
func TestStatelessConnectionUnderAnExistingSessionHearsTheServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, peertest.EchoServer())
	key := nostr.Generate()
	opts := contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Signer: contextvm.NewKeySigner(key)}
	peertest.CallEcho(t, peertest.Connect(t, opts), "first")

	opts.Stateless = true
	tr, err := contextvm.NewClientTransport(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "second", Version: "1"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	peertest.CallEcho(t, cs, "second")
	if sup := tr.ServerSupport(); !sup.Known || !sup.OversizedTransfer {
		t.Fatalf("the second connection knows of the server: %+v; want its discovery tags heard", sup)
	}
}

// A server closing answers what is in flight; a client that has gone
// meanwhile cannot hear it, and that is no news: nothing is logged at the
// default level.
func TestServerClose_ClientGoneIsNoNews(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	s := peertest.EchoServer()
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	var logs waitbuf.Buffer
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, s)
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{}}}`))
	select {
	case <-started:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the call did not start")
	}
	peer.Sub.Close() // gone: nobody listens for the answer
	srv.Close()
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the server warns:\n%s", logs.String())
	}
}
