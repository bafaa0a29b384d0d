package contextvm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestReplayedEventExecutesOnce(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var calls atomic.Int64
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.CounterServer(&calls))
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())

	plain := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	inner := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	wrap, err := contextvm.Wrap(inner, srv.PublicKey(), contextvm.KindEphemeralGiftWrap)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		peer.Publish(plain)
		peer.Publish(wrap)
	}
	// The same inner message in a fresh wrap is a replay too.
	rewrapped, _ := contextvm.Wrap(inner, srv.PublicKey(), contextvm.KindGiftWrap)
	peer.Publish(rewrapped)
	answers := 0
	for {
		if _, ok := peer.Next(time.Second); !ok {
			break
		}
		answers++
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("tool executed %d times for two distinct requests replayed 100 times", got)
	}
	if answers != 2 {
		t.Errorf("got %d answers, want 2", answers)
	}
}

// A request captured from a relay and sent again after the server restarts
// with the same key and state does not run again, plaintext or wrapped.
func TestReplayAfterRestartDoesNotExecute(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	dir := t.TempDir()
	sk := nostr.Generate()
	var calls atomic.Int64
	start := func() (*contextvm.Server, *durable.File) {
		state, err := durable.Open(dir, sk.Public().Hex(), durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(sk), State: state}, peertest.CounterServer(&calls))
		return srv, state
	}
	srv, state := start()
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	plain := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	inner := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	wrap, err := contextvm.Wrap(inner, srv.PublicKey(), contextvm.KindEphemeralGiftWrap)
	if err != nil {
		t.Fatal(err)
	}
	peer.Publish(plain)
	peer.Publish(wrap)
	for range 2 {
		if _, ok := peer.Next(10 * time.Second); !ok {
			t.Fatal("a request was not answered")
		}
	}
	srv.Close()
	state.Close()

	srv, state = start()
	defer state.Close()
	defer srv.Close()
	peer.Publish(plain)
	peer.Publish(wrap)
	rewrapped, _ := contextvm.Wrap(inner, srv.PublicKey(), contextvm.KindGiftWrap)
	peer.Publish(rewrapped)
	// A new request after the replays: once it is answered, the replays,
	// published before it on the same connection, have been seen.
	fresh := peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count","arguments":{}}}`)
	peer.Publish(fresh)
	if _, ok := peer.Next(10 * time.Second); !ok {
		t.Fatal("the fresh request after the restart was not answered")
	}
	if _, ok := peer.Next(500 * time.Millisecond); ok {
		t.Error("a replay was answered after the restart")
	}
	if got := calls.Load(); got != 3 {
		t.Fatalf("tool executed %d times; want 3 (two requests, then one fresh one; the replays never)", got)
	}
}

// A server whose store of executed requests is full refuses new requests
// with the busy code instead of forgetting an id that still guards one.
func TestFullReplayStoreRefusesWithBusy(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var calls atomic.Int64
	// initialize and notifications/initialized take two records.
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, State: durable.NewMemory(durable.Options{MaxRecords: 2})}, peertest.CounterServer(&calls))
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"count","arguments":{}}}`))
	answer, ok := peer.Next(10 * time.Second)
	if !ok {
		t.Fatal("no answer: a refused request must be answered")
	}
	if !strings.Contains(answer.Content, `"code":-32013`) || calls.Load() != 0 {
		t.Fatalf("answer %s after %d calls; want the busy code and no call", answer.Content, calls.Load())
	}
}

func TestStaleEventsAreDroppedWithALogLine(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	var logs waitbuf.Buffer
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Freshness: time.Minute, Logger: logs.Logger()}, peertest.EchoServer())
	peer := peertest.NewRawPeer(t, r.URL)
	old := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now() - 5, Content: `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		Tags: nostr.Tags{{"p", srv.PublicKey().Hex()}}}
	// Within the relay's since window but outside the server's freshness window: backdate the inner event of a wrap.
	old.CreatedAt = nostr.Now() - 3600
	old.Sign(peer.SK)
	wrap, _ := contextvm.Wrap(old, srv.PublicKey(), contextvm.KindEphemeralGiftWrap)
	peer.Publish(wrap)
	logs.Await(t, 10*time.Second, "freshness window")
	if _, ok := peer.Next(500 * time.Millisecond); ok {
		t.Fatal("a stale request was answered")
	}
}

// A request event dated before the server started, and inside the
// freshness window, reaches it: the same request published again after a
// restart, or one from a client whose clock is behind. Relays never store
// ephemeral events, so a since on them would hide nothing but these.
func TestServer_HearsRequestsDatedBeforeItStarted(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer())
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Publish(peer.MessageAt(nostr.Now()-60, srv.PublicKey(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	answer, ok := peer.Next(10 * time.Second)
	if !ok {
		t.Fatal("a request dated a minute ago was not answered")
	}
	if !strings.Contains(answer.Content, `"result"`) {
		t.Fatalf("answered %s", answer.Content)
	}
}

// An answer dated before the client started, inside the freshness window,
// reaches it: a server whose clock is behind is still heard.
func TestClient_HearsAnswersDatedBeforeItStarted(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.NewRawPeer(t, r.URL)
	served := make(chan error, 1)
	go func() {
		req, ok := srv.Next(20 * time.Second)
		if !ok {
			served <- errors.New("no initialize")
			return
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(req.Content), &m)
		srv.Publish(srv.MessageAt(nostr.Now()-60, req.PubKey, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`,
			nostr.Tag{"e", req.ID.Hex()}))
		served <- nil
	}()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil),
		contextvm.ClientOptions{Server: srv.SK.Public().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled})
	if err != nil {
		t.Fatalf("connect, answered a minute back: %v", err)
	}
	cs.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func TestBadInputGetsAnErrorOrALogLine(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	var logs waitbuf.Buffer
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Logger: logs.Logger()}, peertest.EchoServer())
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	me := srv.PublicKey()

	// What is not JSON-RPC is answered as JSON-RPC says, correlated by the
	// event, with id null where none can be read.
	for _, tc := range []struct {
		name, content string
		code          int64
		id            string
	}{
		{"unparsable JSON", `{"jsonrpc":"2.0","id":1,"method":`, jsonrpc.CodeParseError, "null"},
		{"JSON-RPC 1.0", `{"jsonrpc":"1.0","id":5,"method":"ping"}`, jsonrpc.CodeInvalidRequest, "5"},
		{"an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, jsonrpc.CodeInvalidRequest, "null"},
		{"an empty batch", `[]`, jsonrpc.CodeInvalidRequest, "null"},
		{"a batch over the limit", "[" + strings.Repeat(`{"jsonrpc":"2.0","method":"ping","id":1},`, 100) + `{"jsonrpc":"2.0","method":"ping","id":1}]`, jsonrpc.CodeInvalidRequest, "null"},
		{"a batch with a bad member", `[{"jsonrpc":"2.0","id":1,"method":"ping"},1]`, jsonrpc.CodeInvalidRequest, "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evt := peer.Message(me, tc.content)
			peer.Publish(evt)
			answer, ok := peer.Next(10 * time.Second)
			if !ok {
				t.Fatal("no answer")
			}
			var got struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(answer.Content), &got); err != nil || got.Error.Code != tc.code || string(got.ID) != tc.id {
				t.Fatalf("answer %s; want code %d and id %s", answer.Content, tc.code, tc.id)
			}
			if e, _ := peertest.FirstTag(answer.Tags, "e"); e != evt.ID.Hex() {
				t.Fatalf("the answer is not correlated with the event: e=%q", e)
			}
		})
	}
	t.Run("a server that does not serve the author stays silent", func(t *testing.T) {
		guarded := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Logger: logs.Logger(),
			AllowedClients: []nostr.PubKey{nostr.Generate().Public()}}, peertest.EchoServer())
		peer.Publish(peer.Message(guarded.PublicKey(), `{"jsonrpc":"1.0","id":5,"method":"ping"}`))
		logs.Await(t, 10*time.Second, "not JSON-RPC")
		if answer, ok := peer.Next(300 * time.Millisecond); ok {
			t.Fatalf("a stranger got an answer: %s", answer.Content)
		}
	})
	t.Run("unknown method gets method not found", func(t *testing.T) {
		peer.Publish(peer.Message(me, `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`))
		evt, ok := peer.Next(5 * time.Second)
		if !ok {
			t.Fatal("no answer")
		}
		msgs, _, _ := contextvm.DecodeContent(evt.Content)
		resp, _ := msgs[0].(*jsonrpc.Response)
		var werr *jsonrpc.Error
		if resp == nil || !errors.As(resp.Error, &werr) || werr.Code != jsonrpc.CodeMethodNotFound || resp.ID.Raw() != int64(7) {
			t.Fatalf("answer %s", evt.Content)
		}
	})
	t.Run("a wrap that does not decrypt is logged", func(t *testing.T) {
		bogus := nostr.Event{Kind: contextvm.KindEphemeralGiftWrap, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", me.Hex()}}, Content: "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
		bogus.Sign(nostr.Generate())
		peer.Publish(bogus)
		logs.Await(t, 10*time.Second, "does not decrypt")
	})
	t.Run("a wrap hiding a message for someone else is logged", func(t *testing.T) {
		inner := peer.Message(nostr.Generate().Public(), `{"jsonrpc":"2.0","id":8,"method":"ping"}`)
		w, _ := contextvm.Wrap(inner, me, contextvm.KindEphemeralGiftWrap)
		peer.Publish(w)
		logs.Await(t, 10*time.Second, "names another recipient")
	})
}

func TestResponseTooLargeBecomesAnError(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := peertest.EchoServer()
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 70_000)}}}, nil, nil
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptRequired}, s)
	// A client without CEP-22 cannot take the answer in fragments.
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, OversizedThreshold: -1})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodeResponseTooLarge {
		t.Fatalf("err = %v, want a JSON-RPC error %d", err, contextvm.CodeResponseTooLarge)
	}
}

func TestBatchIsAnsweredAsOneEvent(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer())
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	peer.Publish(peer.Message(srv.PublicKey(), `[
		{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"one"}}},
		{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},
		{"jsonrpc":"2.0","id":"b","method":"ping"}
	]`))
	evt, ok := peer.Next(10 * time.Second)
	if !ok {
		t.Fatal("no answer to the batch")
	}
	msgs, batch, err := contextvm.DecodeContent(evt.Content)
	if err != nil || !batch || len(msgs) != 2 {
		t.Fatalf("answer %s: batch=%v err=%v", evt.Content, batch, err)
	}
	ids := []any{msgs[0].(*jsonrpc.Response).ID.Raw(), msgs[1].(*jsonrpc.Response).ID.Raw()}
	if ids[0] != "a" || ids[1] != "b" {
		t.Errorf("batch answer ids %v, want [a b] in request order", ids)
	}
	if _, more := peer.Next(500 * time.Millisecond); more {
		t.Error("more than one event answered the batch")
	}
}

// A session with no room for another request answers "server busy", with a
// code a client can tell from a refusal.
func TestFullInboxAnswersBusy(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Nothing accepts the session, so nothing reads its inbox: the requests
	// pile up until it is full.
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	for i := range 300 {
		peer.Publish(peer.Message(srv.PublicKey(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)))
	}
	// Nothing answers the requests that fit; the first answer is a refusal.
	evt, ok := peer.Next(10 * time.Second)
	if !ok {
		t.Fatal("no busy answer to 300 requests nobody reads")
	}
	msgs, _, _ := contextvm.DecodeContent(evt.Content)
	resp, _ := msgs[0].(*jsonrpc.Response)
	var werr *jsonrpc.Error
	if resp == nil || !errors.As(resp.Error, &werr) {
		t.Fatalf("answer %s", evt.Content)
	}
	if werr.Code == contextvm.CodeUnauthorized {
		t.Fatalf("busy is answered with the unauthorized code %d: %s", werr.Code, evt.Content)
	}
	if werr.Code != contextvm.CodeServerBusy {
		t.Fatalf("answer %s, want code %d", evt.Content, contextvm.CodeServerBusy)
	}
}

func TestShutdownEndsTheSession(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv, ended := serveWatched(t, contextvm.ServerOptions{Relays: []string{r.URL}}, peertest.EchoServer())
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey()) // answered: the session exists
	if n := srv.Sessions(); n != 1 {
		t.Fatalf("%d sessions after initialize", n)
	}
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":"bye","method":"shutdown"}`))
	evt, ok := peer.Next(5 * time.Second)
	if !ok || !strings.Contains(evt.Content, `"result":{}`) || !strings.Contains(evt.Content, `"id":"bye"`) {
		t.Fatalf("shutdown answer %q", evt.Content)
	}
	awaitEnd(t, ended, "the session to end")
	if n := srv.Sessions(); n != 0 {
		t.Fatalf("%d sessions after shutdown", n)
	}
}

func TestAuthorization(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	allowed, stranger := nostr.Generate(), nostr.Generate()
	srv := peertest.Serve(t, contextvm.ServerOptions{
		Relays:             []string{r.URL},
		AllowedClients:     []nostr.PubKey{allowed.Public()},
		PublicCapabilities: []contextvm.Capability{{Method: "tools/list"}, {Method: "tools/call", Name: "whoami"}},
		Authorize: func(ctx context.Context, client nostr.PubKey, req *jsonrpc.Request) error {
			if strings.Contains(string(req.Params), "forbidden") {
				return errors.New("that text is not allowed")
			}
			return nil
		},
	}, peertest.EchoServer())
	call := func(cs *mcp.ClientSession, tool, text string) error {
		ctx, cancel := testwait.Context(t, 10*time.Second)
		defer cancel()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
		return err
	}
	unauthorized := func(err error) bool {
		var werr *jsonrpc.Error
		return errors.As(err, &werr) && werr.Code == contextvm.CodeUnauthorized
	}

	friend := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(allowed)})
	if err := call(friend, "echo", "hi"); err != nil {
		t.Errorf("allowed client: %v", err)
	}
	if err := call(friend, "echo", "forbidden"); !unauthorized(err) || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("hook refusal: %v", err)
	}

	other := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(stranger)})
	if _, err := other.ListTools(context.Background(), nil); err != nil {
		t.Errorf("public tools/list: %v", err)
	}
	if err := call(other, "whoami", ""); err != nil {
		t.Errorf("public tool: %v", err)
	}
	err := call(other, "echo", "hi")
	if !unauthorized(err) || !strings.Contains(err.Error(), nostrx.EncodeNpub(stranger.Public())) {
		t.Errorf("private tool for a stranger: %v, want an unauthorized error naming the client", err)
	}
}

func TestAuthorizationWithoutPublicCapabilitiesRefusesTheHandshake(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, AllowedClients: []nostr.PubKey{nostr.Generate().Public()}}, peertest.EchoServer())
	tr, _ := contextvm.NewClientTransport(contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(ctx, tr, nil)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodeUnauthorized {
		t.Fatalf("err = %v, want unauthorized, not a timeout", err)
	}
}

// Two clients use the same progress token at once; each sees only its own
// progress (the reference routes by token alone and mixes them).
func TestProgressIsRoutedPerClient(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := peertest.EchoServer()
	type in struct {
		Who string `json:"who"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 5; i++ {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: args.Who})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Who}}}, nil, nil
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, s)
	var wg sync.WaitGroup
	for _, who := range []string{"alice", "bob"} {
		wg.Go(func() {
			var mu sync.Mutex
			var seen []string
			fifth := make(chan struct{})
			client := mcp.NewClient(&mcp.Implementation{Name: who}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					seen = append(seen, req.Params.Message)
					if len(seen) == 5 {
						close(fifth)
					}
				},
			})
			ctx, cancel := testwait.Context(t, 20*time.Second)
			defer cancel()
			cs, err := contextvm.Connect(ctx, client, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"who": who}}
			params.SetProgressToken("shared-token")
			if _, err := cs.CallTool(ctx, params); err != nil {
				t.Error(err)
				return
			}
			// The go-sdk may run a progress handler after it returns the
			// result: wait for the fifth.
			select {
			case <-fifth:
			case <-time.After(testwait.Timeout(5 * time.Second)):
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 5 {
				t.Errorf("%s saw %d progress notifications, want 5", who, len(seen))
			}
			for _, m := range seen {
				if m != who {
					t.Errorf("%s received %s's progress", who, m)
				}
			}
		})
	}
	wg.Wait()
}

// A client's cancel reaches the running handler, whose context ends.
func TestCancelReachesTheHandler(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := peertest.EchoServer()
	started, cancelled := make(chan struct{}), make(chan struct{})
	mcp.AddTool(s, &mcp.Tool{Name: "forever"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		close(started)
		select {
		case <-ctx.Done():
			close(cancelled)
			return nil, nil, ctx.Err()
		case <-time.After(testwait.Timeout(30 * time.Second)):
			return nil, nil, errors.New("never cancelled")
		}
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, s)
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "forever"}); err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	select {
	case <-cancelled:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the handler's context was never cancelled")
	}
}

// notifications/resources/updated goes only to sessions subscribed to the URI.
func TestResourceUpdatesGoOnlyToSubscribers(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := mcp.NewServer(&mcp.Implementation{Name: "res"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	const uri = "memo://watched"
	s.AddResource(&mcp.Resource{URI: uri, Name: "watched"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "v"}}}, nil
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}}, s)
	updates := map[string]*atomic.Int64{"watcher": {}, "bystander": {}}
	watcherUpdated := make(chan struct{}, 1)
	sessions := map[string]*mcp.ClientSession{}
	for name, n := range updates {
		client := mcp.NewClient(&mcp.Implementation{Name: name}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
				n.Add(1)
				if name == "watcher" {
					select {
					case watcherUpdated <- struct{}{}:
					default:
					}
				}
			},
		})
		ctx, cancel := testwait.Context(t, 20*time.Second)
		cs, err := contextvm.Connect(ctx, client, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[name] = cs
	}
	if err := sessions["watcher"].Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watcherUpdated:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the watcher never got its update")
	}
	if n := updates["watcher"].Load(); n != 1 {
		t.Fatalf("the watcher got %d updates, want 1", n)
	}
	// Give a misrouted update every chance to arrive: a round trip on the
	// bystander's session comes after it.
	if _, err := sessions["bystander"].ListResources(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := updates["bystander"].Load(); n != 0 {
		t.Fatalf("a session that never subscribed got %d resource updates", n)
	}
}

// Throwaway keys that spend every new session the server would start for
// them, and hold every session they may, never crowd out a client in
// AllowedClients: it starts its session on a budget of its own, in the
// reserve, at the first try.
func TestAllowedClientIsNeverCrowdedOut(t *testing.T) {
	const (
		maxSessions = 8
		reserve     = 2
		burst       = 8
		strangers   = 12
	)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	friend := nostr.Generate()
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		MaxSessions: maxSessions, SessionReserve: reserve,
		SessionRate: 0.001, SessionBurst: burst, // spent by the strangers, not refilled during the test
		AllowedClients: []nostr.PubKey{friend.Public()}, PublicCapabilities: []contextvm.Capability{{Method: "tools/list"}}}, peertest.EchoServer())
	admitted := 0
	for range strangers {
		p := peertest.NewRawPeer(t, r.URL)
		p.Publish(p.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
		answer, ok := p.Next(10 * time.Second)
		if !ok {
			t.Fatal("a stranger's initialize was not answered")
		}
		if strings.Contains(answer.Content, `"result"`) {
			admitted++
		}
	}
	if admitted != maxSessions-reserve {
		t.Fatalf("%d strangers got a session; want %d, the sessions less the reserve", admitted, maxSessions-reserve)
	}
	var logs waitbuf.Buffer // the client's: it says when it was told busy and asked again
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Signer: contextvm.NewKeySigner(friend), Logger: logs.Logger()})
	if got := peertest.CallEcho(t, cs, "hi"); got != "hi" {
		t.Fatalf("echo: %q", got)
	}
	if strings.Contains(logs.String(), "server busy") {
		t.Fatalf("the allowed client was told busy and asked again:\n%s", logs.String())
	}
}
