package roomnats

import (
	"context"
	"time"

	"github.com/cvmgo/cvm/internal/promreg"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
)

// A Cluster is the gateway's room.Backend; these are the methods the
// gateway calls, over the rest of the package.
var _ room.Backend = (*Cluster)(nil)

// History implements room.Backend: the stream is the history.
func (c *Cluster) History() room.HistoryReader { return c }

// RetryAfter is what unavailable error envelopes advise.
func (c *Cluster) RetryAfter() time.Duration { return c.opts.RetryAfter }

// RegisterMetrics serves the cluster's figures with a gateway's.
func (c *Cluster) RegisterMetrics(r *promreg.Registry) { c.stats.register(r, c) }

// Claim implements room.Roster: the newer connection wins, cluster-wide.
func (c *Cluster) Claim(ctx context.Context, topic string, p mcpx.Participant, conn string, max int) (*room.Member, error) {
	old, _, err := c.claim(ctx, topic, p, conn, max)
	return old, err
}

// Release implements room.Roster.
func (c *Cluster) Release(ctx context.Context, topic, id, conn string) error {
	_, err := c.release(ctx, topic, id, conn)
	return err
}

// Leave implements room.Roster. With mcpx.LeaveShutdown this gateway is
// stopping, not the participant leaving: its client reconnects to another
// node, whose new connection replaces the entry (the others see
// "replaced", which ends nothing of theirs with it, calls in flight
// included). One that does not come back within NodeTimeout is reported
// left (timeout): by this node's sweep if its Cluster lives on, else by
// the other nodes' dead-node sweep, as if this node had died.
func (c *Cluster) Leave(ctx context.Context, topic string, p mcpx.Participant, conn string, why mcpx.LeaveReason) {
	if why == mcpx.LeaveShutdown {
		c.orphan(topic, p, conn)
		return
	}
	c.leave(ctx, topic, p, conn, why)
}

// Members implements room.Roster: the cached roster.
func (c *Cluster) Members(topic string) map[string]room.Member { return c.members(topic) }

// Follow implements room.Log: f gets the topic's log from now on, the
// rosters other nodes write and the link's losses.
func (c *Cluster) Follow(ctx context.Context, topic string, f room.Follower) (uint64, func(), error) {
	last, stopLog, err := c.follow(ctx, topic, f.Deliver)
	if err != nil {
		return 0, nil, err
	}
	stopWatch := c.watchTopic(topic, func(s *rosterSnap) { f.RosterChanged(s.members) }, f.LinkLost)
	return last, func() {
		stopWatch()
		stopLog()
	}, nil
}

// Append implements room.Log: the envelope goes to the topic's appender
// (appender.go) and Append returns at once. Its place in the order is
// known when JetStream acknowledged it, or failed to: with Done.
func (c *Cluster) Append(_ context.Context, topic string, a *room.Append) {
	done := a.Done
	a.Done = func(seq uint64, err error) {
		done(seq, err)
		a.Placed()
	}
	c.enqueueAppend(topic, a)
}
