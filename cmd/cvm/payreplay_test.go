package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawClient speaks ContextVM in plaintext with events it signs itself, so
// that a test can publish one of them again, byte for byte.
type rawClient struct {
	t     *testing.T
	sk    nostr.SecretKey
	relay string
	pool  *nostrx.Pool
	sub   *nostrx.Subscription
}

func newRawClient(t *testing.T, relayURL string) *rawClient {
	c := &rawClient{t: t, sk: nostr.Generate(), relay: relayURL}
	c.listen()
	t.Cleanup(func() { c.pool.Close() })
	return c
}

// listen subscribes to the client's messages afresh, as a client process
// started anew would: nothing it saw before is remembered.
func (c *rawClient) listen() {
	c.t.Helper()
	if c.pool != nil {
		c.pool.Close()
	}
	c.pool = nostrx.NewPool(nostrx.PoolOptions{Relays: []string{c.relay}})
	c.sub = c.pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Tags: nostr.TagMap{"p": {c.sk.Public().Hex()}}}, 64)
	select {
	case <-c.sub.Ready():
	case <-time.After(testwait.Timeout(20 * time.Second)):
		c.t.Fatal("the client's subscription never became ready")
	}
}

func (c *rawClient) message(server, content string) nostr.Event {
	c.t.Helper()
	return c.messageAt(nostr.Now(), server, content)
}

// messageAt is message dated at.
func (c *rawClient) messageAt(at nostr.Timestamp, server, content string) nostr.Event {
	c.t.Helper()
	evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: at, Content: content, Tags: nostr.Tags{{"p", server}}}
	if err := evt.Sign(c.sk); err != nil {
		c.t.Fatal(err)
	}
	return evt
}

// publish sends evt; it fails when no one listened for it.
func (c *rawClient) publish(evt nostr.Event) error {
	ctx, cancel := testwait.Context(c.t, 10*time.Second)
	defer cancel()
	return c.pool.Publish(ctx, evt)
}

// rawMessage is a JSON-RPC message as the client reads it.
type rawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Tags nostr.Tags `json:"-"` // the event's
}

// next returns the next message correlated to the request event req, or
// false once deadline has passed.
func (c *rawClient) next(req nostr.ID, deadline time.Time) (rawMessage, bool) {
	for {
		select {
		case evt := <-c.sub.Events():
			if e := evt.Tags.Find("e"); e == nil || e[1] != req.Hex() {
				continue
			}
			var m rawMessage
			if err := json.Unmarshal([]byte(evt.Content), &m); err != nil {
				c.t.Fatalf("a message that is not JSON-RPC: %q", evt.Content)
			}
			m.Tags = evt.Tags
			return m, true
		case <-time.After(time.Until(deadline)):
			return rawMessage{}, false
		}
	}
}

// call publishes req and returns its answer, paying what it asks on the
// way (transparent CEP-8, from payer); false if unanswered by deadline.
func (c *rawClient) call(req nostr.Event, payer payments.Handler, deadline time.Time) (rawMessage, bool) {
	c.t.Helper()
	if err := c.publish(req); err != nil {
		c.t.Fatalf("publish %s: %v", req.Content, err)
	}
	for {
		m, ok := c.next(req.ID, deadline)
		if !ok || m.Method == "" {
			return m, ok
		}
		if m.Method == contextvm.MethodPaymentRequired && payer != nil {
			pr, _, err := contextvm.ParsePaymentRequired(m.Params)
			if err != nil {
				c.t.Fatal(err)
			}
			if _, err := payer.Pay(context.Background(), pr, pr.Amount); err != nil {
				c.t.Fatalf("pay: %v", err)
			}
		}
	}
}

// initialize opens the client's session with server.
func (c *rawClient) initialize(server string) {
	c.t.Helper()
	init := c.message(server, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m, ok := c.call(init, nil, time.Now().Add(testwait.Timeout(20*time.Second))); !ok || m.Error != nil {
		c.t.Fatalf("initialize: %+v %v", m, ok)
	}
	if err := c.publish(c.message(server, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		c.t.Fatal(err)
	}
}

// A paid request event published again right after the gateway was
// killed (SIGKILL) and restarted on the same --data is answered with the
// answer it got before the kill (or -32015, paid, result lost), within
// twice a client's request timeout, 20 times out of 20; each call is
// charged once and run once. The same holds for a request signed 15 s
// before it reaches the gateway (a client whose clock is slow, or a replay
// after a restart that took that long, as one with an npx upstream may):
// the freshness window (10 min) accepts it, so the gateway must hear it.
func TestGatewayPaid_ReplayAfterKillNineIsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		age    nostr.Timestamp // how long before publishing the request is dated
		rounds int
	}{
		{"dated now", 0, 20},
		{"dated 15s back", 15, 3},
	} {
		t.Run(tc.name, func(t *testing.T) { killNineRounds(t, tc.rounds, tc.age) })
	}
}

// killNineRounds runs rounds of {paid call; kill -9 the gateway; restart
// it on the same --data; publish the paid request event again}, the
// request dated age seconds back.
func killNineRounds(t *testing.T, rounds int, age nostr.Timestamp) {
	const price = 10
	// requestTimeout is what a client waits for an answer: short, so that
	// a round with no answer fails fast.
	requestTimeout := testwait.Timeout(5 * time.Second)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if code, _, errOut := c.run("keygen", "--out", key); code != 0 {
		t.Fatal(errOut)
	}
	ledgerPath := filepath.Join(dir, "ledger.json")
	ledger := payments.OpenLedger(ledgerPath)
	if err := ledger.Fund(context.Background(), "alice", int64(rounds*price)); err != nil {
		t.Fatal(err)
	}
	wallet := writeSecret(t, dir, "srv.wallet", "fake://srv?ledger="+ledgerPath)
	// The upstream is served over HTTP by the test itself: it outlives
	// every gateway, counts every run, and a restart starts no process.
	var mu sync.Mutex
	runs := map[string]int{}
	up := mcp.NewServer(&mcp.Implementation{Name: "work", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "work"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		RID string `json:"rid"`
	}) (*mcp.CallToolResult, map[string]string, error) {
		mu.Lock()
		runs[in.RID]++
		mu.Unlock()
		return nil, map[string]string{"rid": in.RID}, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(func() {
		// The sessions of the killed gateways were never closed.
		for ss := range up.Sessions() {
			ss.Close()
		}
		upstream.Close()
	})
	args := []string{"gateway", "--relay", r.URL, "--key", key, "--data", filepath.Join(dir, "data"), "--wallet-file", wallet,
		"--price", fmt.Sprintf("tool:work=%d", price), "--upstream-url", upstream.URL}
	start := func() (*proc, string) {
		t.Helper()
		p := startCVM(t, c, args...)
		var ready gatewayReady
		p.ReadyLine(t, &ready)
		return p, ready.Pubkey
	}
	gw, server := start()
	payer := &payments.FakeHandler{Ledger: ledger, Payer: "alice"}
	unanswered := 0
	for i := range rounds {
		cl := newRawClient(t, r.URL)
		cl.initialize(server)
		req := cl.messageAt(nostr.Now()-age, server, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"work","arguments":{"rid":"r%d"}}}`, i))
		paid, ok := cl.call(req, payer, time.Now().Add(requestTimeout))
		if !ok || paid.Error != nil || !strings.Contains(string(paid.Result), fmt.Sprintf(`"r%d"`, i)) {
			t.Fatalf("round %d: the paid call answered %+v (answered: %v); gateway: %s", i, paid, ok, gw.Stderr)
		}
		gw.Kill()
		gw, _ = start()
		// The client asks again as a new process would, with the same
		// event: it never saw the answer.
		cl.listen()
		began := time.Now()
		if err := cl.publish(req); err != nil {
			t.Errorf("round %d: the request published again: %v", i, err)
		}
		again, ok := cl.next(req.ID, began.Add(2*requestTimeout))
		switch {
		case !ok:
			unanswered++
			t.Errorf("round %d: the paid request published again was not answered within %v", i, 2*requestTimeout)
		case again.Error != nil && again.Error.Code == contextvm.CodePaidResultLost:
		case again.Error != nil || string(again.Result) != string(paid.Result):
			t.Errorf("round %d: the paid request published again answered %s %+v; want %s", i, again.Result, again.Error, paid.Result)
		}
	}
	if unanswered > 0 {
		t.Logf("%d of %d unanswered; the last gateway's log:\n%s", unanswered, rounds, gw.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range rounds {
		if n := runs[fmt.Sprintf("r%d", i)]; n != 1 {
			t.Errorf("r%d ran %d times; want once", i, n)
		}
	}
	alice, _ := ledger.Balance(context.Background(), "alice")
	srv, _ := ledger.Balance(context.Background(), "srv")
	if alice != 0 || srv != int64(rounds*price) {
		t.Errorf("balances alice %d srv %d; want 0 and %d: each call charged once", alice, srv, rounds*price)
	}
}
