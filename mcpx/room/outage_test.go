package room_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
	"github.com/cvmgo/cvm/mcpx/room/roomnats"
)

// These tests are about publish.go's order of answers when the backend
// goes down while echoes wait for the follower; the backend is a node of
// roomnats with hooks (hookedBackend) that hold its follower and its
// appends where a NATS outage would.

// hookedBackend is a roomnats Cluster whose follower calls beforeDeliver
// before it delivers each entry, and whose appends call beforeDone once
// stored, before the gateway hears of it. Both run in the Cluster's
// goroutines, as the NATS client's callbacks do.
type hookedBackend struct {
	*roomnats.Cluster
	beforeDeliver func(room.Entry)
	beforeDone    func()
}

type hookedFollower struct {
	room.Follower
	before func(room.Entry)
}

func (f hookedFollower) Deliver(e room.Entry) {
	f.before(e)
	f.Follower.Deliver(e)
}

func (b *hookedBackend) Follow(ctx context.Context, topic string, f room.Follower) (uint64, func(), error) {
	return b.Cluster.Follow(ctx, topic, hookedFollower{f, b.beforeDeliver})
}

func (b *hookedBackend) Append(ctx context.Context, topic string, a *room.Append) {
	if b.beforeDone != nil {
		done := a.Done
		a.Done = func(seq uint64, err error) {
			b.beforeDone()
			done(seq, err)
		}
	}
	b.Cluster.Append(ctx, topic, a)
}

// stalledFollower is a one-node cluster whose follower stops before the
// topic's first envelope until release: that envelope's echo, once
// JetStream acknowledged it, waits for the follower as it does when NATS
// stops before pushing it to the node.
type stalledFollower struct {
	t       *testing.T
	nats    *natstest.Server
	cl      *roomnats.Cluster
	g       *gatewaytest.Gateway
	reached chan struct{} // closed when the follower stops
	release func()
}

// startStalledFollower starts it; beforeDone (nil: none) runs when an
// append is stored, before the gateway hears of it.
func startStalledFollower(t *testing.T, beforeDone func()) *stalledFollower {
	sf := &stalledFollower{t: t, nats: natstest.Start(t), reached: make(chan struct{})}
	unstall := make(chan struct{})
	var once sync.Once
	sf.release = func() { once.Do(func() { close(unstall) }) }
	stalled := false // only the follower's goroutine touches it
	sf.g, sf.cl = startNode(t, sf.nats, room.Options{Tokens: gatewaytest.NewKeys(t), RatePerSecond: -1}, func(cl *roomnats.Cluster) room.Backend {
		return &hookedBackend{Cluster: cl, beforeDone: beforeDone, beforeDeliver: func(e room.Entry) {
			if e.Seq == 1 && !stalled {
				stalled = true
				close(sf.reached)
				<-unstall
			}
		}}
	})
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

// waitLink waits until the node sees the link to NATS up (or down).
func (sf *stalledFollower) waitLink(up bool) {
	sf.t.Helper()
	testwait.Eventually(sf.t, 30*time.Second, "the node to see the NATS link change", func() bool { return sf.cl.Up() == up })
}

// recover lets the follower go on and NATS come back: the echo of a's
// first envelope goes out, with seq 1, and a's next envelope is echoed
// with seq next.
func (sf *stalledFollower) recover(a *gatewaytest.Client, first string, next uint64) {
	sf.t.Helper()
	sf.release()
	if m := a.Read(); m.ID != first || m.Seq != 1 {
		sf.t.Fatalf("got %s, want the echo of %s with seq 1", m, first)
	}
	sf.nats.Restart()
	sf.waitLink(true)
	id := a.Chat("next")["id"].(string)
	if m := a.ReadEnvelope(); m.ID != id || m.Seq != next {
		sf.t.Fatalf("got %s, want the echo of %s with seq %d", m, id, next)
	}
}

// An echo JetStream acknowledged waits for the follower, which NATS
// stopping holds up until it is back. The answers that waited behind it
// go out when the link is lost, and while it is down the connection's
// next envelopes are answered unavailable at once; the echo goes out when
// the follower reaches it, in the topic's order.
func TestNATS_OutageReleasesAnswersHeldBehindAnEcho(t *testing.T) {
	sf := startStalledFollower(t, nil)
	a, _ := sf.g.Join("room", "a")
	first := a.Chat("first")["id"].(string)
	sf.waitReached()
	testwait.Eventually(t, 30*time.Second, "the first echo to be acknowledged", func() bool {
		acked, _ := room.Echoes(sf.g.Server.Gateway, "room")
		return acked == 1
	})
	// While the link is up, an answer waits behind the echo: the
	// follower is about to reach it.
	toZ := a.Env([]string{"z"}, `{"jsonrpc":"2.0","method":"notifications/x"}`)
	a.Send(toZ)
	testwait.Eventually(t, 30*time.Second, "the unknown_recipient notice to wait behind the echo", func() bool {
		_, waiting := room.Echoes(sf.g.Server.Gateway, "room")
		return waiting == 1
	})
	sf.nats.Stop()
	sf.waitLink(false)
	a.ExpectError(mcpx.CodeUnknownRecipient, toZ["id"].(string))
	later := a.Chat("later")["id"].(string)
	a.ExpectError(mcpx.CodeUnavailable, later)
	sf.recover(a, first, 3)
}

// JetStream acknowledges an append after the link was lost (the
// acknowledgement was on its way): the answers that queued behind the
// envelope while its append was in flight go out then, not once NATS is
// back and the follower reaches its echo.
func TestNATS_EchoAcknowledgedDuringAnOutageHoldsNoAnswer(t *testing.T) {
	stored, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// JetStream stored a's first envelope; its Done waits, as if the
	// acknowledgement were still on its way.
	sf := startStalledFollower(t, func() {
		once.Do(func() {
			close(stored)
			<-proceed
		})
	})
	var proceeded sync.Once
	let := func() { proceeded.Do(func() { close(proceed) }) }
	t.Cleanup(let)
	a, _ := sf.g.Join("room", "a")
	first := a.Chat("first")["id"].(string)
	select {
	case <-stored:
	case <-time.After(testwait.Timeout(30 * time.Second)):
		t.Fatal("the first envelope was never appended")
	}
	sf.nats.Stop()
	sf.waitLink(false)
	later := a.Chat("later")["id"].(string)
	testwait.Eventually(t, 30*time.Second, "the refusal to wait behind the append in flight", func() bool {
		_, waiting := room.Echoes(sf.g.Server.Gateway, "room")
		return waiting == 1
	})
	let()
	a.ExpectError(mcpx.CodeUnavailable, later)
	sf.recover(a, first, 2)
}
