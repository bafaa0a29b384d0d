package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/contextvm"
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
	rp.readyLine(t, &r)
	t.Cleanup(func() { rp.stop(t, syscall.SIGTERM) })
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--session-mode", "per-client", "--max-sessions", "64",
		"--log-level", "warn", "--", demoServerBinary)
	var ready gatewayReady
	p.readyLine(t, &ready)
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM) })

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
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
