package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveDemo serves the demo server over ContextVM with opts (Signer and
// Relays defaulted) and returns it once it listens; with opts.Announce, once
// its relay list is on every relay it announces to.
func serveDemo(t *testing.T, opts contextvm.ServerOptions, s *mcp.Server) *contextvm.Server {
	t.Helper()
	if opts.Signer == nil {
		opts.Signer = contextvm.NewKeySigner(nostr.Generate())
	}
	if s == nil {
		s = demoserver.New()
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), s)
	t.Cleanup(func() { srv.Close() })
	if opts.Announce {
		for _, r := range append(slices.Clone(opts.Relays), opts.AnnounceRelays...) {
			waitForEvent(t, r, nostr.Filter{Authors: []nostr.PubKey{srv.PublicKey()}, Kinds: []nostr.Kind{contextvm.KindRelayList}})
		}
	}
	return srv
}

// waitForEvent returns once an event matching f is on the relay.
func waitForEvent(t *testing.T, relayURL string, f nostr.Filter) {
	t.Helper()
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer p.Close()
	sub := p.Subscribe(f, 1)
	defer sub.Close()
	select {
	case <-sub.Events():
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatalf("nothing matching %v reached %s", f, relayURL)
	}
}

// watchInbox watches the ContextVM messages a server receives on a relay.
func watchInbox(t *testing.T, relayURL string, server nostr.PubKey) *relaytest.Inbox {
	t.Helper()
	return relaytest.WatchInbox(t, relayURL, server, contextvm.KindMessage, contextvm.KindGiftWrap, contextvm.KindEphemeralGiftWrap)
}

// A server that listens on relay A and announces itself (with its relay
// list) on relay B only is called by its npub alone, through B.
func TestCall_FoundThroughADiscoveryRelay(t *testing.T) {
	a := relaytest.Start(t, relay.Options{})
	b := relaytest.Start(t, relay.Options{})
	srv := serveDemo(t, contextvm.ServerOptions{Relays: []string{a.URL}, AnnounceRelays: []string{b.URL}, Announce: true}, nil)
	npub := nostrx.EncodeNpub(srv.PublicKey())
	c := newCLI(t)
	code, out, errOut := c.run("call", npub, "add", "a=2", "b=3", "--discovery-relay", b.URL)
	if code != 0 || !strings.Contains(out, `{"sum":5}`) {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if want := "using relays " + a.URL + " (from the server's relay list on " + b.URL + ")"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q does not say %q", errOut, want)
	}
	// The second time, from the cache.
	code, out, errOut = c.run("tools", npub, "--discovery-relay", b.URL)
	if code != 0 || !strings.Contains(out, "add") || !strings.Contains(errOut, "read 0m ago") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Relays from the config file are the discovery relays and the
	// fallback; a --relay on the command line skips the lookup.
	c.writeConfig(fmt.Sprintf("relays = [%q]\n", b.URL))
	c2 := newCLI(t)
	c2.writeConfig(fmt.Sprintf("relays = [%q]\n", b.URL))
	if code, out, errOut := c2.run("call", npub, "echo", "text=hi"); code != 0 || out != "hi\n" {
		t.Fatalf("configured relays: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := c2.run("call", npub, "echo", "text=hi", "--relay", b.URL, "--timeout", "2s"); code != exitTransport || strings.Contains(errOut, "using relays") {
		t.Fatalf("--relay B (where the server does not listen): code %d, stderr %q", code, errOut)
	}
}

func TestDiscoveryRelay_BadInput(t *testing.T) {
	b := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	npub := nostrx.EncodeNpub(nostr.Generate().Public())
	for _, bad := range []string{"https://relay.example", "wss://user@relay.example", "wss://relay.example:99999"} {
		code, _, errOut := c.run("tools", npub, "--discovery-relay", bad)
		if code != exitLocal || !strings.Contains(errOut, "--discovery-relay") || !strings.Contains(errOut, "wss://relay.example") {
			t.Errorf("--discovery-relay %s: code %d, stderr %q", bad, code, errOut)
		}
	}
	code, _, errOut := c.run("gateway", "--announce-relay", "ftp://x", "--announce", "--relay", b.URL, "--", "true")
	if code != exitLocal || !strings.Contains(errOut, "--announce-relay") {
		t.Errorf("gateway --announce-relay ftp://x: code %d, stderr %q", code, errOut)
	}

	// A hostile relay list is ignored, with a warning, and the fallback used.
	key := nostr.Generate()
	list := nostr.Event{Kind: contextvm.KindRelayList, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"r", "wss://user@evil.example"}, {"r", "http://evil.example"}}}
	for i := range 10 {
		list.Tags = append(list.Tags, nostr.Tag{"r", fmt.Sprintf("ws://evil%d.example", i)})
	}
	if err := list.Sign(key); err != nil {
		t.Fatal(err)
	}
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{b.URL}})
	defer p.Close()
	ctx, cancel := testwait.Context(t, 5*time.Second)
	defer cancel()
	if err := p.Publish(ctx, list); err != nil {
		t.Fatal(err)
	}
	c.writeConfig(fmt.Sprintf("relays = [%q]\n", b.URL))
	_, _, errOut = c.run("tools", nostrx.EncodeNpub(key.Public()), "--timeout", "1s")
	if !strings.Contains(errOut, "left them out") || !strings.Contains(errOut, "evil") || !strings.Contains(errOut, "using relays "+b.URL+" (no usable relay list") {
		t.Errorf("stderr %q: want a warning and the fallback", errOut)
	}
}

// One-shot commands declare no client capabilities: they could not answer
// a server's roots, sampling or elicitation requests. Checked on the wire:
// the initialize each command publishes, in plaintext.
func TestOneShot_DeclaresNoCapabilities(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}}, nil)
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer p.Close()
	sub := p.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Tags: nostr.TagMap{"p": {srv.PublicKey().Hex()}}}, 64)
	defer sub.Close()
	<-sub.Ready()
	c := newCLI(t)
	npub := nostrx.EncodeNpub(srv.PublicKey())
	for _, args := range [][]string{{"tools", npub}, {"call", npub, "echo", "text=x"}, {"prompts", npub}, {"resources", npub}} {
		code, _, errOut := c.run(append(args, "--relay", r.URL, "--stateful", "--encryption", "disabled")...)
		if code != 0 {
			t.Fatalf("%s: code %d, stderr %q", args[0], code, errOut)
		}
		for {
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Capabilities json.RawMessage `json:"capabilities"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte((<-sub.Events()).Content), &msg); err != nil {
				t.Fatal(err)
			}
			if msg.Method != "initialize" {
				continue
			}
			if string(msg.Params.Capabilities) != "{}" {
				t.Errorf("%s declared the capabilities %s", args[0], msg.Params.Capabilities)
			}
			break
		}
	}
}

// A stateless call (CEP-35) publishes one event: the tools/call; with
// --stateful it is initialize, initialized, tools/list and tools/call.
func TestCall_Stateless(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}}, nil)
	in := watchInbox(t, r.URL, srv.PublicKey())
	npub := nostrx.EncodeNpub(srv.PublicKey())
	c := newCLI(t)
	if code, out, errOut := c.run("call", npub, "add", "a=1", "b=2", "--relay", r.URL, "--stateful"); code != 0 || !strings.Contains(out, `{"sum":3}`) {
		t.Fatalf("stateful: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := len(in.Take()); n != 4 {
		t.Errorf("a stateful call published %d events to the server; want 4", n)
	}
	// Typed without tools/list: no announcement and a fresh cache, so
	// JSON arguments.
	c2 := newCLI(t)
	if code, out, errOut := c2.run("call", npub, "echo", `{"text":"hi"}`, "--relay", r.URL, "--stateless"); code != 0 || out != "hi\n" {
		t.Fatalf("stateless: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := len(in.Take()); n != 2 {
		t.Errorf("a stateless call without known tools published %d events; want 2 (tools/list, tools/call)", n)
	}
	if code, out, errOut := c2.run("call", npub, "echo", "text=again", "--relay", r.URL, "--stateless"); code != 0 || out != "again\n" {
		t.Fatalf("stateless, second: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := len(in.Take()); n != 1 {
		t.Errorf("a stateless call with the tools remembered published %d events; want 1", n)
	}
}

// An announced server is called with one event, the second time too, and
// a server that changes its tools is asked again when it says the
// arguments do not fit.
func TestCall_AnnouncedServerOneEvent(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}, Announce: true}, nil)
	in := watchInbox(t, r.URL, srv.PublicKey())
	npub := nostrx.EncodeNpub(srv.PublicKey())
	c := newCLI(t)
	for i := range 2 {
		code, out, errOut := c.run("call", npub, "add", "a=2", "b=3", "--relay", r.URL)
		if code != 0 || !strings.Contains(out, `{"sum":5}`) {
			t.Fatalf("call %d: code %d, stdout %q, stderr %q", i+1, code, out, errOut)
		}
		if n := len(in.Take()); n != 1 {
			t.Errorf("call %d published %d events to the server; want 1", i+1, n)
		}
	}
	// An unknown tool is looked up live before the call fails.
	code, _, errOut := c.run("call", npub, "nosuch", "--relay", r.URL)
	if code != exitProtocol || !strings.Contains(errOut, `the server has no tool "nosuch"`) {
		t.Fatalf("unknown tool: code %d, stderr %q", code, errOut)
	}
}

// cvm call --stream writes the chunks of a CEP-41 stream as they come,
// and says so when the server offers no streams.
func TestCall_Stream(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	var srv *contextvm.Server
	s := mcp.NewServer(&mcp.Implementation{Name: "streamer"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		N int `json:"n"`
	}) (*mcp.CallToolResult, any, error) {
		w, err := srv.OpenStream(req)
		if err != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no stream: " + err.Error()}}}, nil, nil
		}
		for i := range in.N {
			if err := w.Write(ctx, fmt.Sprintf("chunk %d\n", i)); err != nil {
				return nil, nil, err
			}
		}
		if err := w.Close(ctx); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	srv = serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}, OpenStreams: true}, s)
	c := newCLI(t)
	code, out, errOut := c.run("call", nostrx.EncodeNpub(srv.PublicKey()), "count", "n=5", "--stream", "--relay", r.URL)
	if want := "chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n"; code != 0 || out != want {
		t.Fatalf("code %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}

	plain := serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}}, nil)
	code, out, errOut = c.run("call", nostrx.EncodeNpub(plain.PublicKey()), "count", "n=2", "--stream", "--relay", r.URL)
	if code != exitProtocol || out != "" || !strings.Contains(errOut, "does not offer open streams") || !strings.Contains(errOut, "without --stream") {
		t.Fatalf("no streams: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// delayProxy is a loopback WebSocket proxy in front of a relay that holds
// every frame, in each direction, for delay: a relay across the internet.
type delayProxy struct {
	URL   string
	delay time.Duration
	to    string
}

func startDelayProxy(t *testing.T, relayURL string, delay time.Duration) *delayProxy {
	t.Helper()
	p := &delayProxy{delay: delay, to: relayURL}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		down.SetReadLimit(-1)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		up, _, err := websocket.Dial(ctx, p.to, nil)
		if err != nil {
			down.Close(websocket.StatusInternalError, "upstream")
			return
		}
		up.SetReadLimit(-1)
		var pumps sync.WaitGroup
		pumps.Go(func() { p.pump(ctx, cancel, down, up) })
		pumps.Go(func() { p.pump(ctx, cancel, up, down) })
		pumps.Wait()
		down.CloseNow()
		up.CloseNow()
	}))
	srv.Listener.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	p.URL = "ws://" + l.Addr().String()
	return p
}

// pump copies frames from src to dst, each delivered delay after it was
// read, in order.
func (p *delayProxy) pump(ctx context.Context, cancel context.CancelFunc, src, dst *websocket.Conn) {
	type frame struct {
		typ  websocket.MessageType
		data []byte
		due  time.Time
	}
	queue := make(chan frame, 4096)
	var writer sync.WaitGroup
	writer.Go(func() {
		for f := range queue {
			if wait := time.Until(f.due); wait > 0 {
				select {
				case <-time.After(wait): // the delay is the point, not a synchronization
				case <-ctx.Done():
					return
				}
			}
			if err := dst.Write(ctx, f.typ, f.data); err != nil {
				cancel()
				return
			}
		}
	})
	defer writer.Wait()
	defer close(queue)
	for {
		typ, data, err := src.Read(ctx)
		if err != nil {
			cancel()
			return
		}
		select {
		case queue <- frame{typ, data, time.Now().Add(p.delay)}:
		case <-ctx.Done():
			return
		}
	}
}

// The time of a call through relays 50 ms away (each frame delayed 50 ms
// each way, for the client and the server): today's sequence (--stateful:
// initialize, tools/list, tools/call) against the default, a stateless
// call with the announced tools.
func TestCall_RoundTripsThroughASlowRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("measures latency")
	}
	r := relaytest.Start(t, relay.Options{})
	proxy := startDelayProxy(t, r.URL, 50*time.Millisecond)
	srv := serveDemo(t, contextvm.ServerOptions{Relays: []string{proxy.URL}, Announce: true}, nil)
	npub := nostrx.EncodeNpub(srv.PublicKey())
	timed := func(c *cli, args ...string) time.Duration {
		t.Helper()
		start := time.Now()
		code, out, errOut := c.run(append([]string{"call", npub, "add", "a=2", "b=3", "--relay", proxy.URL}, args...)...)
		d := time.Since(start)
		if code != 0 || !strings.Contains(out, `{"sum":5}`) {
			t.Fatalf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		return d
	}
	const runs = 3
	var before, first, after []time.Duration
	for range runs {
		before = append(before, timed(newCLI(t), "--stateful"))
		c := newCLI(t)
		first = append(first, timed(c))
		after = append(after, timed(c))
	}
	med := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	b, f, a := med(before), med(first), med(after)
	t.Logf("call through a relay 50 ms away (median of %d): stateful %s, first stateless %s, second %s; %.1fx faster", runs, b.Round(time.Millisecond), f.Round(time.Millisecond), a.Round(time.Millisecond), float64(b)/float64(a))
	if a >= b {
		t.Errorf("the second call (%s) is no faster than the stateful one (%s)", a, b)
	}
}

// TestCall_SaysWhichRelaysWhenNotObvious: a one-shot command says on
// stderr, at the default level, which relays it used when they came from
// elsewhere than the person's own words (an nprofile's hints here; a relay
// list in TestCall_FoundThroughADiscoveryRelay), and says nothing of relays
// given with --relay or configured, which --log-level debug shows.
func TestCall_SaysWhichRelaysWhenNotObvious(t *testing.T) {
	relayURL, npub := demoOnNostr(t)
	pk, _ := nostrx.ParsePublicKey(npub)
	c := newCLI(t)
	c.writeConfig(fmt.Sprintf("relays = [%q]\n", relayURL))
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for nothing on stderr
	}{
		{"given with --relay", []string{"call", npub, "echo", "text=hi", "--relay", relayURL}, ""},
		{"configured, no relay list", []string{"call", npub, "echo", "text=hi"}, ""},
		{"configured, at debug", []string{"call", npub, "echo", "text=hi", "--log-level", "debug"}, "using relays " + relayURL + " ("},
		{"an nprofile's", []string{"call", nprofileOf(t, pk.Key, relayURL), "echo", "text=hi"}, "using relays " + relayURL + " (from the nprofile)"},
	} {
		code, out, errOut := c.run(tc.args...)
		if code != 0 || out != "hi\n" || (tc.want == "" && errOut != "") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: code %d, stdout %q, stderr %q; want %q", tc.name, code, out, errOut, tc.want)
		}
	}
}
