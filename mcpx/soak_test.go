package mcpx

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSoak_ManyPublishersOneSlowConsumer runs a bounded loopback load: 8
// participants, 4 of them publishing 300 broadcasts of 16 KiB each
// concurrently, and one participant that reads deliberately slowly. Every
// other participant must receive all 1200 envelopes in one order (seq
// 1..1200, no gaps, no duplicates); the slow one must be dropped as a slow
// consumer, not stall anyone; and after the gateway closes no goroutine of
// it remains.
//
// Publishers keep at most a window of envelopes in flight (released as the
// first participant receives them), as a real client awaiting its echoes
// would: without it the test's own readers, slowed by the race detector,
// would be slow consumers too.
func TestSoak_ManyPublishersOneSlowConsumer(t *testing.T) {
	const (
		participants = 8
		publishers   = 4
		perPublisher = 300
		total        = publishers * perPublisher
		window       = 32
	)
	baseline := runtime.NumGoroutine()
	g := startGateway(t, Options{SendQueueBytes: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	clients := make([]*client, participants)
	for i := range clients {
		clients[i], _ = g.join("room:soak", fmt.Sprintf("p%02d", i))
	}
	slow, _ := g.join("room:soak", "slow")
	pad := strings.Repeat("s", 16<<10)
	inFlight := make(chan struct{}, window)

	var wg sync.WaitGroup
	results := make(chan error, participants+publishers)
	for i, c := range clients {
		var received chan struct{}
		if i == 0 {
			received = inFlight
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- readAllInOrder(ctx, c, total, received)
		}()
	}
	// The slow consumer reads one frame every 20 ms until the gateway drops it.
	slowDone := make(chan error, 1)
	go func() {
		for {
			_, err := slow.tryRead(30 * time.Second)
			if err != nil {
				slowDone <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[p]
			for i := 0; i < perPublisher; i++ {
				select {
				case inFlight <- struct{}{}:
				case <-ctx.Done():
					results <- fmt.Errorf("publisher %d: window never opened", p)
					return
				}
				e := c.env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"%d/%d %s"}}`, p, i, pad))
				b, _ := json.Marshal(e)
				if err := c.conn.Write(ctx, 1, b); err != nil {
					results <- fmt.Errorf("publisher %d: %v", p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-slowDone:
	case <-ctx.Done():
		t.Fatal("the slow consumer was never dropped")
	}
	var body struct{ Participants []Participant }
	g.get("/v0/topics/room:soak/participants", g.token("room:soak", "p00"), &body)
	if len(body.Participants) != participants {
		t.Fatalf("%d participants left, want %d (all but the slow one)", len(body.Participants), participants)
	}

	for _, c := range clients {
		c.conn.CloseNow()
	}
	g.stop()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline+2 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after close, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
}

// readAllInOrder reads until n envelopes of kind mcp arrived and checks
// their seqs run 1..n. If received is not nil, it takes one token from it
// per envelope.
func readAllInOrder(ctx context.Context, c *client, n int, received chan struct{}) error {
	want := uint64(1)
	for want <= uint64(n) {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: timed out at seq %d", c.id, want)
		}
		m, err := c.tryRead(30 * time.Second)
		if err != nil {
			return fmt.Errorf("%s at seq %d: %v", c.id, want, err)
		}
		if m.Kind != KindMCP {
			continue
		}
		if m.Seq != want {
			return fmt.Errorf("%s: got seq %d, want %d", c.id, m.Seq, want)
		}
		if received != nil {
			<-received
		}
		want++
	}
	return nil
}
