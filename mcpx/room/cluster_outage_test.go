package room

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stalledFollower is a one-node cluster whose follower stops before the
// topic's first envelope until release: that envelope's echo, once
// JetStream acknowledged it, waits for the follower as it does when NATS
// stops before pushing it to the node.
type stalledFollower struct {
	*testCluster
	g       *testGateway
	reached chan struct{} // closed when the follower stops
	release func()
}

func startStalledFollower(t *testing.T, copts ClusterOptions) *stalledFollower {
	sf := &stalledFollower{testCluster: &testCluster{t: t, nats: natstest.Start(t)}, reached: make(chan struct{})}
	unstall := make(chan struct{})
	var once sync.Once
	sf.release = func() { once.Do(func() { close(unstall) }) }
	stalled := false // only the follower's goroutine touches it
	copts.beforeDeliver = func(e entry) {
		if e.Seq == 1 && !stalled {
			stalled = true
			close(sf.reached)
			<-unstall
		}
	}
	sf.g = sf.addNodeWith(testKeys(t), Options{RatePerSecond: -1}, copts)
	t.Cleanup(sf.release) // before the node closes: cleanups run last in, first out
	return sf
}

// waitReached waits until the follower stopped at the first envelope.
func (sf *stalledFollower) waitReached() {
	sf.t.Helper()
	select {
	case <-sf.reached:
	case <-time.After(testwait.Timeout(30 * time.Second)):
		sf.t.Fatal("the follower never reached the first envelope")
	}
}

// echoes counts topic's echoes JetStream acknowledged that wait for the
// follower, and the answers waiting behind the echoes.
func (g *testGateway) echoes(topic string) (acked, waiting int) {
	t := g.existingTopic(topic)
	t.echoMu.Lock()
	defer t.echoMu.Unlock()
	for _, w := range t.echoes {
		if w.acked {
			acked++
		}
		waiting += len(w.after)
	}
	return acked, waiting
}

// recover lets the follower go on and NATS come back: the echo of a's
// first envelope goes out, with seq 1, and a's next envelope is echoed
// with seq next.
func (sf *stalledFollower) recover(a *client, first string, next uint64) {
	sf.t.Helper()
	sf.release()
	if m := a.read(); m.ID != first || m.Seq != 1 {
		sf.t.Fatalf("got %s, want the echo of %s with seq 1", m, first)
	}
	sf.nats.Restart()
	sf.waitLink(true)
	id := a.chat("next")["id"].(string)
	if m := a.readEnvelope(); m.ID != id || m.Seq != next {
		sf.t.Fatalf("got %s, want the echo of %s with seq %d", m, id, next)
	}
}

func (tc *testCluster) waitLink(up bool) {
	tc.t.Helper()
	for i := range tc.cls {
		testwait.Eventually(tc.t, 30*time.Second, "the node to see the NATS link change", func() bool { return tc.cls[i].Up() == up })
	}
}

// An echo JetStream acknowledged waits for the follower, which NATS
// stopping holds up until it is back. The answers that waited behind it
// go out when the link is lost, and while it is down the connection's
// next envelopes are answered unavailable at once; the echo goes out when
// the follower reaches it, in the topic's order.
func TestNATS_OutageReleasesAnswersHeldBehindAnEcho(t *testing.T) {
	sf := startStalledFollower(t, ClusterOptions{})
	a, _ := sf.g.join("room", "a")
	first := a.chat("first")["id"].(string)
	sf.waitReached()
	testwait.Eventually(t, 30*time.Second, "the first echo to be acknowledged", func() bool {
		acked, _ := sf.g.echoes("room")
		return acked == 1
	})
	// While the link is up, an answer waits behind the echo: the
	// follower is about to reach it.
	toZ := a.env([]string{"z"}, `{"jsonrpc":"2.0","method":"notifications/x"}`)
	a.send(toZ)
	testwait.Eventually(t, 30*time.Second, "the unknown_recipient notice to wait behind the echo", func() bool {
		_, waiting := sf.g.echoes("room")
		return waiting == 1
	})
	sf.nats.Stop()
	sf.waitLink(false)
	a.expectError(mcpx.CodeUnknownRecipient, toZ["id"].(string))
	later := a.chat("later")["id"].(string)
	a.expectError(mcpx.CodeUnavailable, later)
	sf.recover(a, first, 3)
}

// JetStream acknowledges an append after the link was lost (the
// acknowledgement was on its way): the answers that queued behind the
// envelope while its append was in flight go out then, not once NATS is
// back and the follower reaches its echo.
func TestNATS_EchoAcknowledgedDuringAnOutageHoldsNoAnswer(t *testing.T) {
	stored, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var real func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	sf := startStalledFollower(t, ClusterOptions{publishLog: func(ctx context.Context, m *nats.Msg, o ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		ack, err := real(ctx, m, o...)
		once.Do(func() { // the first append: a's first envelope
			close(stored)
			<-proceed
		})
		return ack, err
	}})
	real = sf.cls[0].js.PublishMsg
	var proceeded sync.Once
	let := func() { proceeded.Do(func() { close(proceed) }) }
	t.Cleanup(let)
	a, _ := sf.g.join("room", "a")
	first := a.chat("first")["id"].(string)
	select {
	case <-stored:
	case <-time.After(testwait.Timeout(30 * time.Second)):
		t.Fatal("the first envelope was never appended")
	}
	sf.nats.Stop()
	sf.waitLink(false)
	later := a.chat("later")["id"].(string)
	testwait.Eventually(t, 30*time.Second, "the refusal to wait behind the append in flight", func() bool {
		_, waiting := sf.g.echoes("room")
		return waiting == 1
	})
	let()
	a.expectError(mcpx.CodeUnavailable, later)
	sf.recover(a, first, 2)
}
