package participant

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestClient_GatewayRestartMidConversation(t *testing.T) {
	g := startGateway(t, room.Options{})
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "bob"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finally"}}}, nil, nil
	})
	var alog waitbuf.Buffer
	alice, aev := g.client("room:x", "alice", Options{Logger: alog.Logger()})
	_, bev := g.client("room:x", "bob", Options{Server: SDKServer(srv)})
	aev.wait(t, "bob's join", func(e Event) bool { return e.Type == EventJoin })
	ctx := testCtx(t)

	// A call in flight across the restart.
	slow := make(chan error, 1)
	go func() {
		res, err := alice.Request(ctx, "bob", "tools/call", map[string]any{"name": "slow"})
		if err == nil && !strings.Contains(string(res), "finally") {
			err = fmt.Errorf("result %s", res)
		}
		slow <- err
	}()
	// Chats sent before, during and after the restart: the pause between
	// two is the pacing under test, a stream that spans the restart, so
	// that some chats go into the dying connection and some wait for the
	// next one.
	const n = 60
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := alice.Chat(ctx, fmt.Sprint("m", i)); err != nil {
				sent <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		sent <- nil
	}()
	bev.wait(t, "the first chats", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "m10" })
	g.restart()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	bev.wait(t, "the last chat", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == fmt.Sprint("m", n-1) })
	aev.wait(t, "reconnected", func(e Event) bool { return e.Type == EventDisconnected })
	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight across the restart: %v", err)
	}
	// Every chat exactly once, in order, with increasing seqs.
	var got []string
	var last uint64
	for _, e := range bev.snapshot() {
		if e.Type != EventChat {
			continue
		}
		got = append(got, e.Chat.Text)
		if e.Chat.Seq <= last {
			t.Errorf("seq %d after %d", e.Chat.Seq, last)
		}
		last = e.Chat.Seq
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("m", i))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		envs, _, err := alice.History(ctx, HistoryQuery{Limit: 200})
		var h []string
		for _, e := range envs {
			h = append(h, fmt.Sprintf("%d:%s", e.Seq, e.Payload))
		}
		t.Logf("history (%v): %d entries; alice's log:\n%s", err, len(h), alog.String())
		for _, e := range bev.snapshot() {
			t.Logf("bob event %s %v", e.Type, e.Chat)
		}
		t.Fatalf("bob got\n%v\nwant\n%v", got, want)
	}
}

// A participant that was away while others talked reads what it missed
// from history, once, before anything newer.
func TestClient_ResumeReplaysWhatWasMissed(t *testing.T) {
	g := startGateway(t, room.Options{})
	alice, _ := g.client("room:x", "alice", Options{})
	// bob's reconnects are slow, so alice is back and talking first.
	_, bev := g.client("room:x", "bob", Options{ReconnectMin: 2 * time.Second, ReconnectMax: 2 * time.Second})
	ctx := testCtx(t)
	alice.Chat(ctx, "before")
	bev.wait(t, "before", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "before" })
	g.restart()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 5 {
			alice.Chat(ctx, fmt.Sprint("away", i))
		}
	}()
	wg.Wait()
	bev.wait(t, "away4", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "away4" })
	alice.Chat(ctx, "after")
	bev.wait(t, "after", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "after" })
	var got []string
	replayed := 0
	for _, e := range bev.snapshot() {
		if e.Type == EventChat {
			got = append(got, e.Chat.Text)
			if e.Replayed {
				replayed++
			}
		}
	}
	if strings.Join(got, ",") != "before,away0,away1,away2,away3,away4,after" {
		t.Fatalf("bob got %v", got)
	}
	if replayed == 0 {
		t.Fatalf("nothing was replayed from history: bob was not away (%v)", bev.snapshot())
	}
}

// tcpProxy sits between clients and the gateway so a test can lose bytes
// and cut connections.
type tcpProxy struct {
	t         testing.TB
	ln        net.Listener
	target    string
	blackhole atomic.Bool   // swallow what clients send
	swallowed chan struct{} // a signal each time the blackhole swallowed something
	refuse    atomic.Bool   // close new connections at once
	mu        sync.Mutex
	conns     []net.Conn
	pings     int           // WebSocket pings clients sent through
	pinged    chan struct{} // closed, and replaced, at each ping
}

func newProxy(t testing.TB, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, ln: ln, target: target, swallowed: make(chan struct{}, 1), pinged: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refuse.Load() {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() {
				buf := make([]byte, 32<<10)
				var scan frameScanner
				for {
					n, err := c.Read(buf)
					if n > 0 {
						for range scan.feed(buf[:n]) {
							p.ping()
						}
					}
					switch {
					case n > 0 && !p.blackhole.Load():
						up.Write(buf[:n])
					case n > 0:
						select {
						case p.swallowed <- struct{}{}:
						default:
						}
					}
					if err != nil {
						up.Close()
						return
					}
				}
			}()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut(); <-done })
	return p
}

func (p *tcpProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *tcpProxy) ping() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pings++
	close(p.pinged)
	p.pinged = make(chan struct{})
}

// waitPings waits until clients have sent n more pings than when it was
// called.
func (p *tcpProxy) waitPings(t testing.TB, n int) {
	t.Helper()
	p.mu.Lock()
	want := p.pings + n
	p.mu.Unlock()
	deadline := time.After(testwait.Timeout(patience))
	for {
		p.mu.Lock()
		got, wake := p.pings, p.pinged
		p.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("%d pings of %d in %v", got-want+n, n, testwait.Timeout(patience))
		}
	}
}

// frameScanner counts the pings in what a WebSocket client sends, once
// past the HTTP upgrade request; other HTTP requests are not scanned.
type frameScanner struct {
	buf      []byte
	upgraded bool
	other    bool // not a WebSocket connection
}

// feed takes the next bytes of the stream and returns how many ping
// frames they completed.
func (s *frameScanner) feed(b []byte) (pings int) {
	if s.other {
		return 0
	}
	s.buf = append(s.buf, b...)
	if !s.upgraded {
		end := bytes.Index(s.buf, []byte("\r\n\r\n"))
		if end < 0 {
			return 0
		}
		if !bytes.HasPrefix(s.buf, []byte("GET /v0/ws")) {
			s.other, s.buf = true, nil
			return 0
		}
		s.upgraded, s.buf = true, s.buf[end+4:]
	}
	for len(s.buf) >= 2 {
		// A client's frame: opcode, a masked length (7 bits, or 126 and
		// 2 bytes, or 127 and 8), the 4-byte mask, the payload.
		n, head := uint64(s.buf[1]&0x7f), 2
		switch n {
		case 126:
			if len(s.buf) < 4 {
				return pings
			}
			n, head = uint64(binary.BigEndian.Uint16(s.buf[2:])), 4
		case 127:
			if len(s.buf) < 10 {
				return pings
			}
			n, head = binary.BigEndian.Uint64(s.buf[2:]), 10
		}
		size := uint64(head) + 4 + n
		if uint64(len(s.buf)) < size {
			return pings
		}
		if s.buf[0]&0x0f == 0x9 {
			pings++
		}
		s.buf = s.buf[size:]
	}
	return pings
}

// cut closes every connection through the proxy.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// An envelope written to a connection that died before the gateway read it
// is sent again after the reconnect; one the gateway did read is not.
func TestClient_UnconfirmedEnvelopesAreCheckedAfterReconnect(t *testing.T) {
	g := startGateway(t, room.Options{})
	proxy := newProxy(t, g.Addr.String())
	ev := newEvents()
	alice, err := Connect(testCtx(t), Options{
		Gateway: proxy.url(), Topic: "room:x", Token: g.token("room:x", "alice"),
		PingInterval: -1, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
		OnEvent: ev.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	_, bev := g.client("room:x", "bob", Options{})
	ctx := testCtx(t)

	// Delivered, then the connection dies unconfirmed: no duplicate.
	alice.Notify(ctx, []string{"bob"}, methodChat, map[string]string{"text": "reached"})
	bev.wait(t, "reached", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "reached" })
	// Lost on the way: sent again.
	proxy.blackhole.Store(true)
	alice.Notify(ctx, []string{"bob"}, methodChat, map[string]string{"text": "lost"})
	select {
	case <-proxy.swallowed:
	case <-ctx.Done():
		t.Fatal("the chat never reached the proxy")
	}
	proxy.cut()
	proxy.blackhole.Store(false)
	ev.wait(t, "disconnect", func(e Event) bool { return e.Type == EventDisconnected })
	bev.wait(t, "lost, sent again", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "lost" })
	alice.Notify(ctx, []string{"bob"}, methodChat, map[string]string{"text": "after"})
	bev.wait(t, "after", func(e Event) bool { return e.Type == EventChat && e.Chat.Text == "after" })
	if got := strings.Join(bev.chats(), ","); got != "alice:reached,alice:lost,alice:after" {
		t.Fatalf("bob got %s", got)
	}
}

// After a gateway restart the peers come back one by one: a request to a
// peer that is slower to reconnect than its caller is still answered.
func TestClient_PeerSlowToReconnectKeepsItsRequests(t *testing.T) {
	g := startGateway(t, room.Options{})
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "slowpoke"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil, nil
	})
	caller, cev := g.client("room:x", "caller", Options{})
	g.client("room:x", "slowpoke", Options{Server: SDKServer(srv), ReconnectMin: 1500 * time.Millisecond, ReconnectMax: 2 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := caller.Request(testCtx(t), "slowpoke", "tools/call", map[string]any{"name": "wait"})
		done <- err
	}()
	testwait.Eventually(t, patience, "the call in flight", func() bool {
		return caller.pending.has("tools/call")
	})
	g.restart()
	// The caller is back first and does not find slowpoke in its welcome.
	cev.wait(t, "slowpoke missing after the reconnect", func(e Event) bool {
		return e.Type == EventLeave && e.Participant.ID == "slowpoke" && e.Replayed
	})
	cev.wait(t, "slowpoke back", func(e Event) bool { return e.Type == EventJoin && e.Participant.ID == "slowpoke" })
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the call to a peer slower to reconnect: %v", err)
	}
}

// The same, when the request leaves only once the gateway is back: the
// caller, back first, sends it while the peer is still away, and the
// gateway stores it with unknown_recipient. The peer, in its grace, reads
// it from history when it comes back and answers; the call does not fail.
func TestClient_RequestSentBeforeThePeerIsBackIsAnswered(t *testing.T) {
	g := startGateway(t, room.Options{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "slowpoke"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil, nil
	})
	caller, cev := g.client("room:x", "caller", Options{ReconnectMin: 50 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	g.client("room:x", "slowpoke", Options{Server: SDKServer(srv), ReconnectMin: 1500 * time.Millisecond, ReconnectMax: 2 * time.Second})
	done := make(chan error, 1)
	g.RestartAfter(func() {
		cev.wait(t, "the caller disconnected", func(e Event) bool { return e.Type == EventDisconnected })
		go func() { // it waits for the caller to be back
			_, err := caller.Request(testCtx(t), "slowpoke", "tools/call", map[string]any{"name": "hello"})
			done <- err
		}()
	})
	if err := <-done; err != nil {
		t.Fatalf("the call sent before its peer was back: %v", err)
	}
}
