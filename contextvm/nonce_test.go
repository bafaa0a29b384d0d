package contextvm_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Two messages alike within a second are two events: every message event,
// whichever side sends it and whatever it answers, carries a nonce. Without
// one, the second of two identical progress notifications had the first's
// event id and was dropped by the client as a replay.
func TestEveryMessageEventIsDistinct(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	watcher := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer watcher.Close()
	all := watcher.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}}, 256)
	<-all.Ready()

	s := peertest.EchoServer()
	mcp.AddTool(s, &mcp.Tool{Name: "twice"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		// A request to the client, which the client answers...
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		// ...and the same progress twice.
		for range 2 {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, s)
	var progress atomic.Int64
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, client, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "twice"}
	params.SetProgressToken("p")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	// Progress goes out before the result, which waits for it to settle.
	if n := progress.Load(); n != 2 {
		t.Fatalf("%d of 2 identical progress notifications arrived", n)
	}
	cs.Close()

	// The watch waits for the events it must see (initialize,
	// initialized, its answer, the call, ping, its answer, progress ×2,
	// result: at least 7), however slowly the relay delivers them, then
	// checks any more that come while it is quiet.
	seen := 0
	check := func(evt nostr.Event) {
		seen++
		if _, ok := peertest.FirstTag(evt.Tags, "nonce"); !ok {
			t.Errorf("a message without a nonce, from the %s: %s %v", side(evt, srv), evt.Content, evt.Tags)
		}
	}
	deadline := time.After(testwait.Timeout(20 * time.Second))
	for seen < 7 {
		select {
		case evt := <-all.Events():
			check(evt)
		case <-deadline:
			t.Fatalf("watched %d message events; want at least 7", seen)
		}
	}
	for {
		select {
		case evt := <-all.Events():
			check(evt)
		case <-time.After(500 * time.Millisecond):
			return
		}
	}
}

func side(evt nostr.Event, srv *contextvm.Server) string {
	if evt.PubKey == srv.PublicKey() {
		return "server"
	}
	return "client"
}
