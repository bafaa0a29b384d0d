package roomnats

import (
	"context"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
)

// watchLink calls the topics' linkLost each time the link to NATS goes
// down, until ctx ends.
func (c *Cluster) watchLink(ctx context.Context) {
	wasUp := true
	for {
		up, _, changed := c.conn.Status()
		if wasUp && !up {
			c.mu.Lock()
			var ws []*topicWatch
			for _, tw := range c.watchers {
				ws = append(ws, tw...)
			}
			c.mu.Unlock()
			for _, w := range ws {
				w.linkLost()
			}
		}
		wasUp = up
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// heartbeat announces the node and reports the participants of nodes not
// heard from in NodeTimeout as left.
func (c *Cluster) heartbeat(ctx context.Context) {
	tick := time.NewTicker(c.opts.NodeTimeout / 5)
	defer tick.Stop()
	wasUp := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c.logShed()
		up := c.conn.Up()
		if !up {
			wasUp = false
			continue
		}
		now := time.Now()
		if !wasUp {
			// Back from an outage: nobody was heard meanwhile, which
			// proves nothing about them.
			c.mu.Lock()
			c.upSince = now
			c.mu.Unlock()
			wasUp = true
		}
		if err := c.conn.NC.Publish(nodeHeartbeat, []byte(c.node)); err != nil {
			continue
		}
		c.retryLeaves(ctx)
		c.sweepOrphans(ctx, now)
		c.sweep(ctx, now)
	}
}

// sweep removes the roster entries of dead nodes and publishes their
// leaves; of several nodes sweeping, the one whose write wins publishes.
// A topic's dead entries go in one write, however many there are.
func (c *Cluster) sweep(ctx context.Context, now time.Time) {
	c.mu.Lock()
	if now.Sub(c.upSince) < c.opts.NodeTimeout {
		c.mu.Unlock()
		return
	}
	dead := map[string][]room.Member{}
	for topic, s := range c.rosters {
		for _, m := range s.members {
			if m.Node == c.node {
				continue
			}
			if last, ok := c.seen[m.Node]; !ok || now.Sub(last) > c.opts.NodeTimeout {
				dead[topic] = append(dead[topic], m)
			}
		}
	}
	c.mu.Unlock()
	for topic, ms := range dead {
		var removed []room.Member
		_, err := c.update(ctx, topic, func(roster map[string]room.Member) (bool, error) {
			removed = removed[:0]
			for _, m := range ms {
				if cur, ok := roster[m.P.ID]; ok && cur.Conn == m.Conn {
					delete(roster, m.P.ID)
					removed = append(removed, m)
				}
			}
			return len(removed) > 0, nil
		})
		if err != nil {
			continue
		}
		for _, m := range removed {
			c.stats.deadLeaves.Add(1)
			c.log.Info("participant of a dead node reported left", "topic", topic, "participant", m.P.ID, "dead_node", m.Node)
			e := room.PresenceEnvelope(time.Now(), mcpx.PresenceLeave, m.P, mcpx.LeaveTimeout)
			if err := c.Publish(ctx, room.Delivery{Topic: topic, Frame: e.AppendJSON(nil)}); err != nil {
				c.log.Warn("leave of a dead node's participant not published", "topic", topic, "err", err)
			}
		}
	}
}

// orphaned is a roster entry of this node whose connection ended with its
// gateway's shutdown: the participant has NodeTimeout to connect again
// (anywhere) before it is reported left.
type orphaned struct {
	topic string
	p     mcpx.Participant
	conn  string
	since time.Time
}

// orphan records that conn, participant p's connection in topic, ended
// with its gateway's shutdown, leaving its roster entry for the
// participant's next connection to replace.
func (c *Cluster) orphan(topic string, p mcpx.Participant, conn string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orphans = append(c.orphans, orphaned{topic, p, conn, time.Now()})
}

// sweepOrphans reports left the participants whose connection ended with
// their gateway's shutdown more than NodeTimeout ago and that did not
// connect again (their entry still names the old connection).
func (c *Cluster) sweepOrphans(ctx context.Context, now time.Time) {
	c.mu.Lock()
	var due []orphaned
	keep := c.orphans[:0]
	for _, o := range c.orphans {
		if now.Sub(o.since) > c.opts.NodeTimeout {
			due = append(due, o)
		} else {
			keep = append(keep, o)
		}
	}
	c.orphans = keep
	c.mu.Unlock()
	for _, o := range due {
		ok, err := c.release(ctx, o.topic, o.p.ID, o.conn)
		if err != nil {
			c.orphan(o.topic, o.p, o.conn) // NATS answers again later
			continue
		}
		if !ok {
			continue // connected again, on some node
		}
		c.stats.deadLeaves.Add(1)
		c.log.Info("participant of a stopped gateway did not come back; reported left", "topic", o.topic, "participant", o.p.ID)
		e := room.PresenceEnvelope(time.Now(), mcpx.PresenceLeave, o.p, mcpx.LeaveTimeout)
		if err := c.Publish(ctx, room.Delivery{Topic: o.topic, Frame: e.AppendJSON(nil)}); err != nil {
			c.log.Warn("leave not published", "topic", o.topic, "participant", o.p.ID, "err", err)
		}
	}
}
