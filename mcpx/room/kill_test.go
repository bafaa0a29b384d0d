package room_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/roomtest"
)

// A gateway killed with SIGKILL while a participant publishes as fast as
// it can has stored every envelope it echoed: the echo, which carries the
// seq, is the sender's acknowledgement, so it must come after the commit.
// After the restart, new envelopes get seqs above every one handed out
// before the crash, even those that were delivered live and never stored.
func TestGateway_KilledGatewayKeepsEveryEchoedEnvelope(t *testing.T) {
	dir := t.TempDir()
	keys, err := room.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	gw := room.StartChildGateway(t, dir)
	const topic = "room:crash"
	sub := gw.Dial(t, keys, topic, "sub")
	pub := gw.Dial(t, keys, topic, "pub")

	// sub reads everything live, so that it never slows the gateway, and
	// remembers the highest seq it saw.
	var maxLive uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			_, data, err := sub.Read(context.Background())
			if err != nil {
				return
			}
			var e mcpx.Envelope
			if json.Unmarshal(data, &e) == nil && e.Seq > maxLive {
				maxLive = e.Seq
			}
		}
	})

	// pub keeps a window of envelopes without an echo, as a client that
	// waits for its acknowledgements does, and records every echo.
	const window, killAfter = 256, 1500
	p := roomtest.Publish(t, pub, "pub", window)
	killWhenEchoed(t, gw, p, killAfter, 30*time.Second)
	echoed, lastEcho := p.Stop()
	wg.Wait()

	gw = room.StartChildGateway(t, dir)
	stored := gw.History(t, keys, topic, "pub")
	missing, wrong := p.Unstored(stored)
	t.Logf("%d envelopes echoed before the kill (seqs up to %d, %d seen live by sub); %d in history after the restart",
		len(echoed), lastEcho, maxLive, len(stored))
	if len(missing) > 0 || len(wrong) > 0 {
		t.Fatalf("%d echoed envelopes missing from history after the crash (e.g. %v); %d stored under another id (e.g. %v)",
			len(missing), first(missing, 5), len(wrong), first(wrong, 5))
	}

	// Seqs never repeat: the next envelope is numbered above everything
	// anyone saw before the crash.
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	seq, err := roomtest.PublishOne(ctx, gw.Dial(t, keys, topic, "pub"), "pub", "after")
	if err != nil {
		t.Fatalf("no echo after the restart: %v", err)
	}
	if seq <= max(lastEcho, maxLive) {
		t.Fatalf("seq %d after the restart repeats one handed out before the crash (up to %d)", seq, max(lastEcho, maxLive))
	}
}

// A node (a separate cvm room serve --nats process) killed with SIGKILL
// while a participant on it publishes as fast as its acknowledgements
// allow: every envelope it echoed is in history, read through the other
// node; the other node's participant keeps being served, sees the dead
// node's participant leave, and the publisher, reconnected to the other
// node, continues with a higher seq.
func TestNATS_KilledNodeKeepsEveryEchoedEnvelope(t *testing.T) {
	ns := natstest.Start(t)
	dir := t.TempDir()
	keys, err := room.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	doomed := room.StartChildGateway(t, dir, "--nats", ns.URL())
	other := room.StartChildGateway(t, dir, "--nats", ns.URL())
	const topic = "room:crash"
	sub := other.Dial(t, keys, topic, "sub")
	pub := doomed.Dial(t, keys, topic, "pub")

	var wg sync.WaitGroup
	live := make(chan mcpx.Envelope, 1<<16)
	wg.Go(func() {
		defer close(live)
		for {
			_, data, err := sub.Read(context.Background())
			if err != nil {
				return
			}
			var e mcpx.Envelope
			if json.Unmarshal(data, &e) == nil {
				live <- e
			}
		}
	})
	const window, killAfter = 64, 300
	p := roomtest.Publish(t, pub, "pub", window)
	killWhenEchoed(t, doomed, p, killAfter, 60*time.Second)
	echoed, lastEcho := p.Stop()

	// The other node reports the dead node's participant left (NodeTimeout
	// 5 s plus a sweep), and serves sub throughout.
	deadline := time.After(testwait.Timeout(30 * time.Second))
	for left := false; !left; {
		select {
		case e, ok := <-live:
			if !ok {
				t.Fatal("sub's connection to the surviving node ended")
			}
			var pr mcpx.Presence
			left = e.Kind == mcpx.KindPresence && json.Unmarshal(e.Payload, &pr) == nil &&
				pr.Event == mcpx.PresenceLeave && pr.Participant.ID == "pub"
		case <-deadline:
			t.Fatalf("no leave of pub in %v; other node stderr:\n%s", testwait.Timeout(30*time.Second), other.Stderr())
		}
	}

	stored := other.History(t, keys, topic, "pub")
	missing, wrong := p.Unstored(stored)
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
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	seq, err := roomtest.PublishOne(ctx, other.Dial(t, keys, topic, "pub"), "pub", "after")
	if err != nil {
		t.Fatalf("no echo from the surviving node: %v", err)
	}
	if seq != uint64(len(stored))+1 {
		t.Fatalf("seq %d after the kill, want %d (right after history)", seq, len(stored)+1)
	}
	sub.CloseNow()
	wg.Wait()
}

// killWhenEchoed kills gw once p has had n envelopes echoed, failing t if
// that takes longer than d (scaled by testwait's knob).
func killWhenEchoed(t *testing.T, gw *room.ChildGateway, p *roomtest.Publisher, n int, d time.Duration) {
	t.Helper()
	if !testwait.Until(t.Context(), d, func() bool { return p.Echoes() >= n }) {
		t.Fatalf("only %d echoes in %v; gateway stderr:\n%s", p.Echoes(), testwait.Timeout(d), gw.Stderr())
	}
	gw.Kill()
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
