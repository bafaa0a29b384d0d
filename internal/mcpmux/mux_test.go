//lint:file-ignore SA1019 sampling is deprecated (SEP-2577), not gone; the mux still relays it
package mcpmux

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

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testUpstream serves a go-sdk server over in-memory pipes, one server
// session per Open, and counts what reached the server.
type testUpstream struct {
	server *mcp.Server
	opens  atomic.Int64
	failN  atomic.Int64 // the next failN opens fail
	subs   atomic.Int64
	unsubs atomic.Int64
	hung   chan string // the text argument of each hang, once it runs
	cancel chan string // ... once it is cancelled

	mu    sync.Mutex
	conns []mcp.Connection // the mux's ends of the pipes
}

type textArg struct {
	Text string `json:"text,omitempty"`
}

func newTestUpstream(t testing.TB) *testUpstream {
	u := &testUpstream{hung: make(chan string, 16), cancel: make(chan string, 16)}
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, &mcp.ServerOptions{
		Instructions:       "upstream instructions",
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { u.subs.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { u.unsubs.Add(1); return nil },
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a textArg) (*mcp.CallToolResult, any, error) {
		return text(a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArg) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 3; i++ {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: a.Text})
		}
		return text("done " + a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, a textArg) (*mcp.CallToolResult, any, error) {
		u.hung <- a.Text
		<-ctx.Done()
		u.cancel <- a.Text
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArg) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Text}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "r"}}}, nil
	})
	u.server = s
	return u
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (u *testUpstream) Open(ctx context.Context) (mcp.Connection, error) {
	u.opens.Add(1)
	if u.failN.Add(-1) >= 0 {
		return nil, errors.New("the upstream is broken")
	}
	u.failN.Store(0)
	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	if _, err := u.server.Connect(context.WithoutCancel(ctx), serverEnd, nil); err != nil {
		return nil, err
	}
	conn, err := clientEnd.Connect(ctx)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.conns = append(u.conns, conn)
	u.mu.Unlock()
	return conn, nil
}

// waitHung waits for the hang call with text to run in the server.
func (u *testUpstream) waitHung(t testing.TB, text string) {
	t.Helper()
	for {
		select {
		case got := <-u.hung:
			if got == text {
				return
			}
		case <-time.After(testwait.Timeout(10 * time.Second)):
			t.Fatalf("the hang call %q never ran", text)
		}
	}
}

// kill cuts the newest connection, as a crash of the server would.
func (u *testUpstream) kill() {
	u.mu.Lock()
	conn := u.conns[len(u.conns)-1]
	u.mu.Unlock()
	conn.Close()
}

// testCaller records what the mux sends it.
type testCaller struct {
	t   testing.TB
	s   *Session
	msg chan sent
}

type sent struct {
	msg     jsonrpc.Message
	related jsonrpc.ID
}

func (c *testCaller) Send(msg jsonrpc.Message, related jsonrpc.ID) error {
	select {
	case c.msg <- sent{msg, related}:
		return nil
	default:
		return errors.New("test caller's queue is full")
	}
}

func openMux(t testing.TB, u Upstream, routing Routing) *Mux {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	m, err := Open(ctx, Options{Upstream: u, ProtocolVersion: "2025-11-25", Routing: routing, Name: "the test mux",
		Hint: "try per-client", RestartMin: time.Millisecond, RestartMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// join adds an initialized caller that declares sampling if asked to.
func join(t testing.TB, m *Mux, sampling bool) *testCaller {
	t.Helper()
	c := &testCaller{t: t, msg: make(chan sent, 256)}
	c.s = m.Join(c)
	t.Cleanup(c.s.Leave)
	caps := `{}`
	if sampling {
		caps = `{"sampling":{}}`
	}
	res := c.request(mcpmsg.IntID(0), mcpmsg.MethodInitialize, `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"c","version":"1"}}`)
	if res.Error != nil {
		t.Fatalf("initialize: %v", res.Error)
	}
	return c
}

// next waits for the next message to the caller.
func (c *testCaller) next() sent {
	c.t.Helper()
	select {
	case m := <-c.msg:
		return m
	case <-time.After(testwait.Timeout(10 * time.Second)):
		c.t.Fatal("nothing reached the caller")
		return sent{}
	}
}

// request sends a request and waits for its answer, keeping what else
// arrives for later.
func (c *testCaller) request(id jsonrpc.ID, method, params string) *jsonrpc.Response {
	c.t.Helper()
	c.s.Handle(&jsonrpc.Request{ID: id, Method: method, Params: json.RawMessage(params)})
	return c.answer(id, nil)
}

// answer waits for the answer to id; other messages go to others.
func (c *testCaller) answer(id jsonrpc.ID, others *[]sent) *jsonrpc.Response {
	c.t.Helper()
	for {
		m := c.next()
		if r, ok := m.msg.(*jsonrpc.Response); ok && r.ID == id {
			return r
		}
		if others != nil {
			*others = append(*others, m)
		}
	}
}

func toolText(t testing.TB, r *jsonrpc.Response) string {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error answer: %v", r.Error)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func toolCall(tool, text string) string {
	return fmt.Sprintf(`{"name":%q,"arguments":{"text":%q}}`, tool, text)
}

func TestMux_EveryCallerGetsTheUpstreamsInitializeResult(t *testing.T) {
	m := openMux(t, newTestUpstream(t), RouteSole)
	c := join(t, m, false)
	res := c.request(mcpmsg.IntID(1), mcpmsg.MethodInitialize, `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"again","version":"1"}}`)
	var info mcp.InitializeResult
	if err := json.Unmarshal(res.Result, &info); err != nil || info.ServerInfo.Name != "upstream" || info.Instructions != "upstream instructions" {
		t.Fatalf("initialize result %s", res.Result)
	}
	if m.Result().ServerInfo.Name != "upstream" {
		t.Fatalf("Result() = %+v", m.Result())
	}
}

func TestMux_RequestsBeforeInitializeAreRefusedAndPingIsAnswered(t *testing.T) {
	m := openMux(t, newTestUpstream(t), RouteSole)
	c := &testCaller{t: t, msg: make(chan sent, 16)}
	c.s = m.Join(c)
	defer c.s.Leave()
	if r := c.request(mcpmsg.IntID(1), "ping", `{}`); r.Error != nil {
		t.Fatalf("ping: %v", r.Error)
	}
	r := c.request(mcpmsg.IntID(2), "tools/list", `{}`)
	if e := wireErr(r); e == nil || e.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(e.Message, "initialize first") {
		t.Fatalf("tools/list before initialize: %+v", r.Error)
	}
}

// Two callers use the same request id and the same progress token: each
// gets its own answer and its own progress, under its own token.
func TestMux_IDsAndProgressTokensAreRenumbered(t *testing.T) {
	m := openMux(t, newTestUpstream(t), RouteSole)
	a, b := join(t, m, false), join(t, m, false)
	params := func(who string) string {
		return fmt.Sprintf(`{"name":"progress","arguments":{"text":%q},"_meta":{"progressToken":1}}`, who)
	}
	var wg sync.WaitGroup
	for _, c := range []*struct {
		c    *testCaller
		name string
	}{{a, "a"}, {b, "b"}} {
		wg.Go(func() {
			var others []sent
			c.c.s.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(7), Method: "tools/call", Params: json.RawMessage(params(c.name))})
			r := c.c.answer(mcpmsg.IntID(7), &others)
			if got := toolText(t, r); got != "done "+c.name {
				t.Errorf("%s got %q", c.name, got)
			}
			for _, o := range others {
				n := o.msg.(*jsonrpc.Request)
				tok, _ := mcpmsg.ProgressToken(n)
				if tok.String() != "1" || !strings.Contains(string(n.Params), `"message":"`+c.name+`"`) {
					t.Errorf("%s got progress %s", c.name, n.Params)
				}
			}
			if len(others) != 3 {
				t.Errorf("%s got %d progress notifications, want 3", c.name, len(others))
			}
		})
	}
	wg.Wait()
	if n := m.InFlight(); n != 0 {
		t.Fatalf("%d calls left in flight", n)
	}
}

func TestMux_SubscriptionsAreCountedAcrossCallers(t *testing.T) {
	u := newTestUpstream(t)
	m := openMux(t, u, RouteSole)
	a, b := join(t, m, false), join(t, m, false)
	sub := func(c *testCaller, id int64, method string) {
		t.Helper()
		if r := c.request(mcpmsg.IntID(id), method, `{"uri":"test://r"}`); r.Error != nil {
			t.Fatalf("%s: %v", method, r.Error)
		}
	}
	sub(a, 1, mcpmsg.MethodSubscribe)
	sub(b, 1, mcpmsg.MethodSubscribe)
	sub(a, 2, mcpmsg.MethodUnsubscribe)
	if s, us := u.subs.Load(), u.unsubs.Load(); s != 1 || us != 0 {
		t.Fatalf("upstream saw %d subscribe and %d unsubscribe; want 1 and 0", s, us)
	}
	// The last subscriber leaving withdraws the subscription.
	b.s.Leave()
	sync := join(t, m, false) // a request after the leave: the unsubscribe went first
	sync.request(mcpmsg.IntID(1), "tools/list", `{}`)
	if us := u.unsubs.Load(); us != 1 {
		t.Fatalf("upstream saw %d unsubscribe after the last subscriber left; want 1", us)
	}
}

func TestMux_CancellationIsTranslated(t *testing.T) {
	u := newTestUpstream(t)
	m := openMux(t, u, RouteSole)
	c := join(t, m, false)
	c.s.Handle(&jsonrpc.Request{ID: mcpmsg.StringID("mine"), Method: "tools/call", Params: json.RawMessage(toolCall("hang", "cancel me"))})
	u.waitHung(t, "cancel me")
	c.s.Handle(mcpmsg.Cancelled(mcpmsg.StringID("mine"), "changed my mind"))
	select {
	case got := <-u.cancel:
		if got != "cancel me" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the upstream never saw the cancellation")
	}
	if n := m.InFlight(); n != 0 {
		t.Fatalf("%d calls in flight after the cancellation", n)
	}
}

func TestMux_ACallerLeavingCancelsItsCalls(t *testing.T) {
	u := newTestUpstream(t)
	m := openMux(t, u, RouteSole)
	c := join(t, m, false)
	c.s.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(1), Method: "tools/call", Params: json.RawMessage(toolCall("hang", "left"))})
	u.waitHung(t, "left")
	c.s.Leave()
	select {
	case got := <-u.cancel:
		if got != "left" {
			t.Fatalf("cancelled %q", got)
		}
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the upstream never heard that the caller left")
	}
	select {
	case m := <-c.msg:
		t.Fatalf("the caller heard %v after it left", m.msg)
	default:
	}
}

// sampleFrom starts a sample call from c and returns the upstream's request
// as c sees it, or the call's error answer if the request was refused.
func sampleFrom(t *testing.T, c *testCaller, id int64) (*jsonrpc.Request, jsonrpc.ID, *jsonrpc.Response) {
	t.Helper()
	c.s.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(id), Method: "tools/call", Params: json.RawMessage(toolCall("sample", "hi"))})
	m := c.next()
	switch r := m.msg.(type) {
	case *jsonrpc.Request:
		return r, m.related, nil
	case *jsonrpc.Response:
		return nil, jsonrpc.ID{}, r
	}
	t.Fatalf("unexpected %T", m.msg)
	return nil, jsonrpc.ID{}, nil
}

// The server's sampling request goes to the caller the routing picks,
// and that caller's answer comes back into the tool's result: under
// RouteSole the one caller with a call in flight; under RouteNewest the
// newest call of a caller that declared sampling, though another caller
// (undeclared) has a call in flight too.
func TestMux_SamplingGoesToTheRoutedCaller(t *testing.T) {
	for _, tc := range []struct {
		name    string
		routing Routing
		// busyOther: another caller, undeclared, has a call in flight.
		busyOther bool
		id        int64
		text      string
	}{
		{"sole: the one busy caller is asked", RouteSole, false, 5, "sampled"},
		{"newest: the newest declared call is asked", RouteNewest, true, 9, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newTestUpstream(t)
			m := openMux(t, u, tc.routing)
			c := join(t, m, true)
			if tc.busyOther {
				b := join(t, m, false)
				b.s.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(1), Method: "tools/call", Params: json.RawMessage(toolCall("hang", "busy"))})
				u.waitHung(t, "busy")
			}
			id := mcpmsg.IntID(tc.id)
			req, related, refused := sampleFrom(t, c, tc.id)
			if refused != nil || req.Method != mcpmsg.MethodCreateMessage || related != id {
				t.Fatalf("request %v related %v refused %v", req, related.Raw(), refused)
			}
			c.s.Handle(&jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"role":"assistant","model":"m","content":{"type":"text","text":"` + tc.text + `"}}`)})
			if got := toolText(t, c.answer(id, nil)); got != tc.text {
				t.Fatalf("tool result %q", got)
			}
		})
	}
}

func TestMux_RouteSole_RefusesWhatItCannotTell(t *testing.T) {
	u := newTestUpstream(t)
	m := openMux(t, u, RouteSole)
	undeclared := join(t, m, false)
	_, _, refused := sampleFrom(t, undeclared, 1)
	if refused == nil || !strings.Contains(answerText(refused), "did not declare") {
		t.Fatalf("undeclared caller: %v", refused)
	}

	a, b := join(t, m, true), join(t, m, true)
	b.s.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(1), Method: "tools/call", Params: json.RawMessage(toolCall("hang", "busy"))})
	u.waitHung(t, "busy")
	_, _, refused = sampleFrom(t, a, 2)
	if refused == nil || !strings.Contains(answerText(refused), "2 clients have requests in flight") || !strings.Contains(answerText(refused), "try per-client") {
		t.Fatalf("two callers in flight: %v", refused)
	}
}

// An upstream that dies fails what is in flight at once, is restarted, and
// gets the subscriptions and log level again; callers hear that the lists
// may have changed.
func TestMux_UpstreamDeathFailsCallsAndRestarts(t *testing.T) {
	u := newTestUpstream(t)
	m := openMux(t, u, RouteSole)
	c := join(t, m, false)
	c.request(mcpmsg.IntID(1), mcpmsg.MethodSubscribe, `{"uri":"test://r"}`)
	c.request(mcpmsg.IntID(2), mcpmsg.MethodSetLevel, `{"level":"debug"}`)
	c.s.Handle(&jsonrpc.Request{ID: mcpmsg.IntID(3), Method: "tools/call", Params: json.RawMessage(toolCall("hang", "dies"))})
	u.waitHung(t, "dies")
	u.kill()
	r := c.answer(mcpmsg.IntID(3), nil)
	if e := wireErr(r); e == nil || e.Code != CodeUpstreamUnavailable || !strings.Contains(e.Message, "restarting") {
		t.Fatalf("call in flight when the upstream died: %+v", r)
	}
	testwait.Eventually(t, 10*time.Second, "the restart", func() bool { return u.subs.Load() == 2 })
	if got := toolText(t, c.request(mcpmsg.IntID(4), "tools/call", toolCall("echo", "back"))); got != "back" {
		t.Fatalf("after the restart: %q", got)
	}
}

// A caller counts a call as in flight until its answer has been handed to
// the caller's Send, the upstream's or the mux's own when the upstream
// died: whoever ends idle callers by InFlight (the gateway's reaper) never
// ends one whose answer is on its way.
func TestMux_InFlightUntilTheAnswerIsHandedOver(t *testing.T) {
	u := newTestUpstream(t)
	m := openMux(t, u, RouteSole)
	var s atomic.Pointer[Session]
	inFlight := make(chan int, 4) // InFlight as each answer reaches Send
	s.Store(m.Join(CallerFunc(func(msg jsonrpc.Message, _ jsonrpc.ID) error {
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID != mcpmsg.IntID(0) {
			inFlight <- s.Load().InFlight()
		}
		return nil
	})))
	defer s.Load().Leave()
	s.Load().Handle(&jsonrpc.Request{ID: mcpmsg.IntID(0), Method: mcpmsg.MethodInitialize,
		Params: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)})

	s.Load().Handle(&jsonrpc.Request{ID: mcpmsg.IntID(1), Method: "tools/call", Params: json.RawMessage(toolCall("echo", "hi"))})
	if n := within(t, inFlight, "the answer"); n != 1 {
		t.Fatalf("in flight %d while the upstream's answer is handed over, want 1", n)
	}
	s.Load().Handle(&jsonrpc.Request{ID: mcpmsg.IntID(2), Method: "tools/call", Params: json.RawMessage(toolCall("hang", "dies"))})
	u.waitHung(t, "dies")
	u.kill()
	if n := within(t, inFlight, "the error for the call the upstream died with"); n != 1 {
		t.Fatalf("in flight %d while the error is handed over, want 1", n)
	}
	testwait.Eventually(t, 10*time.Second, "nothing in flight", func() bool { return s.Load().InFlight() == 0 })
}

func within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

func wireErr(r *jsonrpc.Response) *jsonrpc.Error {
	var e *jsonrpc.Error
	errors.As(r.Error, &e)
	return e
}

// answerText is what an answer says: its error, or its tool result's text
// (a go-sdk tool reports its handler's error as a result with isError).
func answerText(r *jsonrpc.Response) string {
	if r.Error != nil {
		return r.Error.Error()
	}
	var res mcp.CallToolResult
	json.Unmarshal(r.Result, &res)
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
