package room

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/mcpx"
)

// A node (a separate cvm room serve --nats process) killed with SIGKILL
// while a participant on it publishes as fast as its acknowledgements
// allow: every envelope it echoed is in history, read through the other
// node; the other node's participant keeps being served, sees the dead
// node's participant leave, and the publisher, reconnected to the other
// node, continues with a higher seq.
func TestNATS_KilledNodeKeepsEveryEchoedEnvelope(t *testing.T) {
	ns := natstest.Start(t)
	dir := t.TempDir()
	keys, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	doomed := startChildGateway(t, dir, "--nats", ns.URL())
	other := startChildGateway(t, dir, "--nats", ns.URL())
	const topic = "room:crash"
	sub := dialChild(t, other, keys, topic, "sub")
	pub := dialChild(t, doomed, keys, topic, "pub")

	var wg sync.WaitGroup
	live := make(chan msg, 1<<16)
	wg.Go(func() {
		defer close(live)
		for {
			_, data, err := sub.Read(context.Background())
			if err != nil {
				return
			}
			var m msg
			if json.Unmarshal(data, &m) == nil {
				m.raw = data
				live <- m
			}
		}
	})
	const window, killAfter = 64, 300
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	stop := make(chan struct{})
	killNow := make(chan struct{})
	echoed := map[string]uint64{}
	// pub's writer and echo reader, waited for before echoed is read:
	// the reader may still be handling an echo when pub is closed.
	var pubWG sync.WaitGroup
	pubWG.Go(func() {
		for n := 1; ; n++ {
			select {
			case <-credits:
			case <-stop:
				return
			}
			frame := fmt.Sprintf(`{"protocol":"mcp-x/v0","id":"d-%d","ts":"2026-01-01T00:00:00Z","from":"pub","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}}`, n, n)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := pub.Write(ctx, websocket.MessageText, []byte(frame))
			cancel()
			if err != nil {
				return
			}
		}
	})
	var lastEcho uint64
	pubWG.Go(func() {
		for {
			_, data, err := pub.Read(context.Background())
			if err != nil {
				return
			}
			var m msg
			if json.Unmarshal(data, &m) != nil || m.From != "pub" || m.Kind != mcpx.KindMCP {
				continue
			}
			if m.Seq <= lastEcho {
				t.Errorf("echo seq %d after %d", m.Seq, lastEcho)
			}
			lastEcho = m.Seq
			echoed[m.ID] = m.Seq
			if len(echoed) == killAfter {
				close(killNow)
			}
			credits <- struct{}{}
		}
	})
	select {
	case <-killNow:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d echoes in 60 s; node stderr:\n%s", len(echoed), doomed.stderr)
	}
	doomed.kill()
	close(stop)
	pub.CloseNow()
	pubWG.Wait()

	// The other node reports the dead node's participant left (NodeTimeout
	// 5 s plus a sweep), and serves sub throughout.
	deadline := time.After(30 * time.Second)
	for left := false; !left; {
		select {
		case m, ok := <-live:
			if !ok {
				t.Fatal("sub's connection to the surviving node ended")
			}
			left = m.Kind == mcpx.KindPresence && m.event() == mcpx.PresenceLeave && m.presenceID() == "pub"
		case <-deadline:
			t.Fatalf("no leave of pub in 30 s; other node stderr:\n%s", other.stderr)
		}
	}

	stored := childHistory(t, other, keys, topic, "pub")
	var missing, wrong []string
	for id, seq := range echoed {
		switch got, ok := stored[seq]; {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s(seq %d)", id, seq))
		case got != id:
			wrong = append(wrong, fmt.Sprintf("seq %d: echoed %s, stored %s", seq, id, got))
		}
	}
	t.Logf("%d envelopes echoed before the kill (seqs up to %d); %d in history read through the other node", len(echoed), lastEcho, len(stored))
	if len(missing) > 0 || len(wrong) > 0 {
		t.Fatalf("%d echoed envelopes missing from history (e.g. %v); %d stored under another id (e.g. %v)",
			len(missing), first(missing, 5), len(wrong), first(wrong, 5))
	}
	for seq := uint64(1); seq <= uint64(len(stored)); seq++ {
		if _, ok := stored[seq]; !ok {
			t.Fatalf("history has a gap at seq %d of %d", seq, len(stored))
		}
	}

	// pub reconnects to the surviving node and goes on above every seq.
	pub = dialChild(t, other, keys, topic, "pub")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pub.Write(ctx, websocket.MessageText, []byte(`{"protocol":"mcp-x/v0","id":"after","ts":"2026-01-01T00:00:00Z","from":"pub","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":0}}}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := pub.Read(ctx)
		if err != nil {
			t.Fatalf("no echo from the surviving node: %v", err)
		}
		var m msg
		if json.Unmarshal(data, &m) == nil && m.ID == "after" {
			if m.Seq != uint64(len(stored))+1 {
				t.Fatalf("seq %d after the kill, want %d (right after history)", m.Seq, len(stored)+1)
			}
			break
		}
	}
	sub.CloseNow()
	wg.Wait()
}
