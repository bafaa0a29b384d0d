package replica

import (
	"context"
	"time"
)

// A replica that cannot coordinate a request with its group (its link to
// NATS is down or has just come back, or the shared store failed) cannot
// know whether another replica has claimed it or will: the others take a
// replica cut off from NATS for dead after the membership timeout, and
// then run its clients' requests, the ones it received already included.
// So it neither runs such a request nor refuses it: it holds it, and says
// nothing. Once it can coordinate again it routes the held requests, in
// the order they came and before any newer one, through the claim like
// any other: one that another replica claimed is dropped (that replica
// answers it); one that nobody claimed is claimed and run here or, when it
// was held for longer than holdRunTimeouts membership timeouts, claimed
// and answered CodeReplicaUnavailable, which the claim makes true: no
// replica can run it any more. docs/replicas.md has the reasoning.

// holdRunTimeouts bounds, in membership timeouts, how long after it came a
// held request may still run: as long as a survivor takes over a dead
// replica's requests (it keeps them 2× the timeout), and well within a
// client's usual timeout (30 to 60 s), so that a call does not run after
// its caller has given up on it, and perhaps called again.
const holdRunTimeouts = 2

// heldMax bounds the requests a replica holds; beyond it the oldest is
// given up, with a log line, and its client's own timeout answers it.
const heldMax = skippedMax

// hold keeps o, a request this replica owns but could not coordinate, for
// release. It returns the oldest request held if it had to give it up to
// make room.
func (g *Group) hold(o *msg) (dropped *msg) {
	if o.heldAt.IsZero() {
		o.heldAt = time.Now()
		g.stats.Held.Add(1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) >= heldMax {
		dropped, g.held = g.held[0], g.held[1:]
	}
	g.held = append(g.held, o)
	return dropped
}

// release returns the held requests, oldest first, and forgets them, once
// this replica can coordinate again; nil until then.
func (g *Group) release() []*msg {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 || !g.readyLocked(time.Now()) {
		return nil
	}
	out := g.held
	g.held = nil
	return out
}

// wakeHeld tells the router to route the held requests when they can be:
// with no newer request coming, nothing else would.
func (g *Group) wakeHeld() {
	g.mu.Lock()
	due := len(g.held) > 0 && g.readyLocked(time.Now())
	g.mu.Unlock()
	if due {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// pause stops coordination for a beat after the shared store failed: the
// requests this replica owns meanwhile are held, and tried again together
// after it, instead of each waiting for the store to fail again.
func (g *Group) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauseUntil = time.Now().Add(g.beat)
}

// heldTooLong reports whether o was held for too long to run now.
func (g *Group) heldTooLong(o *msg) bool {
	return !o.heldAt.IsZero() && time.Since(o.heldAt) > holdRunTimeouts*g.timeout
}

// holdMsg holds o, which this replica owns but cannot coordinate now
// (why says what failed), on the router's goroutine.
func (g *Group) holdMsg(o *msg, why string) {
	first := o.heldAt.IsZero()
	if dropped := g.hold(o); dropped != nil {
		g.log.Warn("giving up a held message: too many are held; its client's own timeout answers it",
			"id", dropped.in.ID().Hex(), "client", dropped.in.Client().Hex())
	}
	if first {
		g.log.Info("holding a message: the replica group cannot coordinate it now, so it is neither run nor refused until it can",
			"id", o.in.ID().Hex(), "client", o.in.Client().Hex(), "why", why)
	}
}

// routeHeld routes the held requests again, oldest first, once this
// replica can coordinate: on the router's goroutine, before the request
// that comes next, so that a client's requests keep their order. A held
// request that has gone stale meanwhile is dropped, as it would have been
// had it come now.
func (g *Group) routeHeld(ctx context.Context) {
	for _, o := range g.release() {
		g.again(ctx, o)
	}
}

// waker routes the held requests, on the router's goroutine, when the
// membership loop says they can be (wakeHeld), until ctx ends.
func (g *Group) waker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wake:
			g.host.OnRouter(ctx, g.routeHeld)
		}
	}
}
