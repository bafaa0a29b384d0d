package room_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
	"go.uber.org/goleak"
)

// TestSoak_ManyPublishersOneSlowConsumer runs a bounded loopback load: 8
// participants, 4 of them publishing 300 broadcasts of 8 KiB each
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
	// Whatever runs now is not the gateway's; after Close, nothing of the
	// gateway's may run.
	before := goleak.IgnoreCurrent()
	start := time.Now()
	g := gatewaytest.Start(t, room.Options{SendQueueBytes: 512 << 10})
	ctx, cancel := testwait.Context(t, 4*time.Minute)
	defer cancel()

	clients := make([]*gatewaytest.Client, participants)
	for i := range clients {
		clients[i], _ = g.Join("room:soak", fmt.Sprintf("p%02d", i))
	}
	slow := g.DialSlow("room:soak", "slow")
	pad := strings.Repeat("s", 8<<10)
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
	// The slow consumer reads one frame every 50 ms until the gateway drops
	// it: the sleep is its slowness, the behaviour under test.
	slowDone := make(chan error, 1)
	go func() {
		for {
			if _, _, err := slow.Conn.Read(ctx); err != nil {
				slowDone <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
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
				e := c.Env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"%d/%d %s"}}`, p, i, pad))
				b, _ := json.Marshal(e)
				if err := c.Conn.Write(ctx, 1, b); err != nil {
					results <- fmt.Errorf("publisher %d: %v", p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("all delivered at %v", time.Since(start))
	close(results)
	for err := range results {
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-slowDone:
		t.Logf("slow dropped at %v", time.Since(start))
	case <-ctx.Done():
		t.Fatal("the slow consumer was never dropped")
	}
	var body struct{ Participants []mcpx.Participant }
	g.Get("/v0/topics/room:soak/participants", g.Token("room:soak", "p00"), &body)
	if len(body.Participants) != participants {
		t.Fatalf("%d participants left, want %d (all but the slow one)", len(body.Participants), participants)
	}
	if n := room.SlowConsumerDrops(g.Server.Gateway); n != 1 {
		t.Fatalf("%v connections dropped as slow consumers, want 1", n)
	}

	for _, c := range append(clients, slow) {
		c.Conn.CloseNow()
	}
	g.Stop()
	t.Logf("stopped at %v", time.Since(start))
	// goleak retries briefly: goroutines that are ending may still be on
	// their way out.
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after close: %v", err)
	}
}

// readAllInOrder reads until n envelopes of kind mcp arrived and checks
// their seqs run 1..n. If received is not nil, it takes one token from it
// per envelope. It reads the seq with a byte search, not a JSON decode: the
// race detector makes decoding the test's bottleneck, and the frames'
// validity is checked elsewhere.
func readAllInOrder(ctx context.Context, c *gatewaytest.Client, n int, received chan struct{}) error {
	want := uint64(1)
	for want <= uint64(n) {
		_, data, err := c.Conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("%s at seq %d: %v", c.ID, want, err)
		}
		if !bytes.Contains(data, []byte(`"kind":"mcp"`)) {
			continue
		}
		i := bytes.LastIndex(data, []byte(`,"seq":`))
		seq, err := strconv.ParseUint(string(bytes.TrimSuffix(data[i+len(`,"seq":`):], []byte("}"))), 10, 64)
		if i < 0 || err != nil {
			return fmt.Errorf("%s: no seq in %.200s", c.ID, data)
		}
		if seq != want {
			return fmt.Errorf("%s: got seq %d, want %d", c.ID, seq, want)
		}
		if received != nil {
			<-received
		}
		want++
	}
	return nil
}
