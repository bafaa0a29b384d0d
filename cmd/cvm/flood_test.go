package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayCommand_ThrowawayKeysFailNoEstablishedCall floods a
// per-client gateway bounded to 64 sessions with 200 fresh keys, each
// sending an initialize and a tools/call at once, while an established client makes 60
// sequential calls. None of the established client's calls may fail; the
// newcomers may be refused. Its p99 latency during the flood is printed as
// a ratio to its p99 before it, measured in the same run.
func TestGatewayCommand_ThrowawayKeysFailNoEstablishedCall(t *testing.T) {
	const (
		established = 60
		newcomers   = 200
	)
	// Relay and gateway run as cvm processes, as they would be deployed:
	// this test process, built with the race detector, only drives them.
	c := newCLI(t)
	rp := startCVM(t, c, "relay", "--listen", "127.0.0.1:0", "--memory", "--events-per-second", "-1", "--connections-per-second", "-1")
	var r relayReady
	rp.ReadyLine(t, &r)
	t.Cleanup(func() { rp.Stop(t, syscall.SIGTERM) })
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--session-mode", "per-client", "--max-sessions", "64",
		"--log-level", "warn", "--", demoServer(t))
	var ready gatewayReady
	p.ReadyLine(t, &ready)
	t.Cleanup(func() { p.Stop(t, syscall.SIGTERM) })

	ctx, cancel := testwait.Context(t, 3*time.Minute)
	defer cancel()
	connect := func() (*mcp.ClientSession, error) {
		return contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "flood", Version: "1"}, nil), contextvm.ClientOptions{
			Server: ready.Npub, Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
			Signer: contextvm.NewKeySigner(nostr.Generate()),
		})
	}
	client, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	calls := func(n int) (latencies []time.Duration, failed int) {
		for i := range n {
			start := time.Now()
			res, err := client.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": i, "b": 1}})
			if err != nil || res.IsError {
				t.Logf("established call %d failed: %v", i, err)
				failed++
				continue
			}
			latencies = append(latencies, time.Since(start))
		}
		return latencies, failed
	}
	// The newcomers need no client of their own: a key, a signed
	// initialize and a signed tools/call each, signed before anything is
	// measured and published at once.
	flood := newcomerEvents(ready.Pubkey, newcomers)
	calls(10) // warm up
	baseline, failed := calls(established)
	if failed != 0 {
		t.Fatalf("%d calls failed before the flood", failed)
	}

	published := make(chan error, 1)
	go func() { published <- publish(ctx, r.URL, flood) }()
	during, failed := calls(established)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if failed != 0 {
		t.Fatalf("%d of the established client's %d calls failed during the flood", failed, established)
	}
	before, after := p99(baseline), p99(during)
	t.Logf("established client p99: %v before the flood, %v during it: ratio %s", before, after,
		strconv.FormatFloat(float64(after)/float64(before), 'f', 2, 64))
}

// newcomerEvents are, for each of n fresh keys, an initialize and a
// tools/call to server.
func newcomerEvents(server string, n int) []nostr.Event {
	var events []nostr.Event
	for i := range n {
		sk := nostr.Generate()
		for _, content := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"newcomer","version":"1"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":` + strconv.Itoa(i) + `,"b":1}}}`,
		} {
			evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", server}}, Content: content}
			evt.Sign(sk)
			events = append(events, evt)
		}
	}
	return events
}

// publish publishes events through one connection and waits for the relay
// to accept them all.
func publish(ctx context.Context, relayURL string, events []nostr.Event) error {
	conn, _, err := websocket.Dial(ctx, relayURL, nil)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	for _, evt := range events {
		frame, _ := json.Marshal([]any{"EVENT", evt})
		if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
			return err
		}
	}
	for accepted := 0; accepted < len(events); accepted++ {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("after %d of %d events accepted: %w", accepted, len(events), err)
		}
		var ok []any
		if json.Unmarshal(data, &ok) != nil || len(ok) < 3 || ok[0] != "OK" || ok[2] != true {
			return fmt.Errorf("the relay refused an event: %s", data)
		}
	}
	return nil
}

// p99 is the 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// TestGatewayCommand_StrangersLeaveTheReserve floods a per-client gateway
// with an allow-list, whose reserve comes from the configuration
// (CVM_GATEWAY_SESSION_RESERVE, the key gateway.session-reserve, bound to
// --session-reserve): strangers get the sessions less the reserve, and
// the allowed client's initialize and call go through at the first try.
func TestGatewayCommand_StrangersLeaveTheReserve(t *testing.T) {
	const (
		maxSessions = 8
		reserve     = 3
		strangers   = 20
	)
	c := newCLI(t)
	c.env["CVM_GATEWAY_SESSION_RESERVE"] = strconv.Itoa(reserve)
	rp := startCVM(t, c, "relay", "--listen", "127.0.0.1:0", "--memory", "--events-per-second", "-1", "--connections-per-second", "-1")
	var r relayReady
	rp.ReadyLine(t, &r)
	t.Cleanup(func() { rp.Stop(t, syscall.SIGTERM) })
	friend := nostr.Generate()
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--max-sessions", strconv.Itoa(maxSessions), "--session-rate", "-1",
		"--allow", friend.Public().Hex(), "--public", "tools/list", "--log-level", "warn", "--", demoServer(t))
	var ready gatewayReady
	p.ReadyLine(t, &ready)
	t.Cleanup(func() { p.Stop(t, syscall.SIGTERM) })

	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	var inits []nostr.Event
	var keys []string
	for i, evt := range newcomerEvents(ready.Pubkey, strangers) {
		if i%2 == 0 { // the initialize; the call after it is not needed
			inits = append(inits, evt)
			keys = append(keys, evt.PubKey.Hex())
		}
	}
	answers := listen(ctx, t, r.URL, keys)
	if err := publish(ctx, r.URL, inits); err != nil {
		t.Fatal(err)
	}
	if got := answers(inits); got != maxSessions-reserve {
		t.Fatalf("%d strangers got a session; want %d, --max-sessions less the reserve", got, maxSessions-reserve)
	}
	var logs waitbuf.Buffer // the client's: it says when it was told busy and asked again
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "friend", Version: "1"}, nil), contextvm.ClientOptions{
		Server: ready.Npub, Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(friend), Logger: logs.Logger(),
	})
	if err != nil {
		t.Fatalf("the allowed client's initialize: %v", err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil || res.IsError {
		t.Fatalf("the allowed client's call: %v", err)
	}
	if strings.Contains(logs.String(), "server busy") {
		t.Fatalf("the allowed client was told busy and asked again:\n%s", logs.String())
	}
}

// listen subscribes, over a websocket of its own, to the messages sent to
// keys, and returns what waits for the answer to each of events and says
// how many were results. It trusts its relay: a test verifies no answers.
func listen(ctx context.Context, t *testing.T, relayURL string, keys []string) (answers func(events []nostr.Event) (results int)) {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, relayURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	conn.SetReadLimit(-1)
	if err := wsjson.Write(ctx, conn, []any{"REQ", "answers", map[string]any{"kinds": []nostr.Kind{contextvm.KindMessage}, "#p": keys}}); err != nil {
		t.Fatal(err)
	}
	read := func() (kind string, msg []json.RawMessage) {
		if err := wsjson.Read(ctx, conn, &msg); err != nil {
			t.Fatalf("reading the answers: %v", err)
		}
		if len(msg) > 0 {
			json.Unmarshal(msg[0], &kind)
		}
		return kind, msg
	}
	for kind, _ := read(); kind != "EOSE"; kind, _ = read() {
	}
	return func(events []nostr.Event) (results int) {
		pending := make(map[string]bool, len(events))
		for _, evt := range events {
			pending[evt.ID.Hex()] = true
		}
		for len(pending) > 0 {
			kind, msg := read()
			var answer nostr.Event
			if kind != "EVENT" || len(msg) < 3 || json.Unmarshal(msg[2], &answer) != nil {
				continue
			}
			if ref := answer.Tags.Find("e"); len(ref) > 1 && pending[ref[1]] {
				delete(pending, ref[1])
				if strings.Contains(answer.Content, `"result"`) {
					results++
				}
			}
		}
		return results
	}
}
