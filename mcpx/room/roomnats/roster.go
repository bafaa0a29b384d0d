package roomnats

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go/jetstream"
)

type rosterSnap struct {
	rev     uint64
	members map[string]room.Member
}

// watch applies every change of the roster bucket to the cache and tells
// the topics that follow it.
func (c *Cluster) watch(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the end of the initial values
			}
			topic, ok := topicFromKey(e.Key())
			if !ok {
				continue
			}
			snap := &rosterSnap{rev: e.Revision(), members: map[string]room.Member{}}
			if e.Operation() == jetstream.KeyValuePut {
				if err := json.Unmarshal(e.Value(), &snap.members); err != nil {
					c.log.Error("unreadable roster entry", "topic", topic, "err", err)
					continue
				}
			}
			c.apply(topic, snap, true)
		}
	}
}

func topicFromKey(key string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(key, "t."))
	if err != nil || !strings.HasPrefix(key, "t.") {
		return "", false
	}
	return string(b), true
}

// apply makes snap the cached roster of topic if it is newer, and tells
// the topic's followers when it comes from the watcher (notify): this
// node's own writes need no telling.
func (c *Cluster) apply(topic string, snap *rosterSnap, notify bool) {
	c.mu.Lock()
	if old := c.rosters[topic]; old != nil && old.rev >= snap.rev {
		c.mu.Unlock()
		return
	}
	c.rosters[topic] = snap
	if !notify {
		c.mu.Unlock()
		return
	}
	ws := append([]*topicWatch{}, c.watchers[topic]...)
	c.mu.Unlock()
	for _, w := range ws {
		w.roster(snap)
	}
}

// watchTopic tells a topic of this node what happens outside its log,
// until the returned function is called: roster gets every later roster
// of topic written by another node, linkLost runs each time the link to
// NATS goes down. Neither may block.
func (c *Cluster) watchTopic(topic string, roster func(*rosterSnap), linkLost func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &topicWatch{roster: roster, linkLost: linkLost}
	c.watchers[topic] = append(c.watchers[topic], w)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		ws := c.watchers[topic]
		for i, x := range ws {
			if x == w {
				c.watchers[topic] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(c.watchers[topic]) == 0 {
			delete(c.watchers, topic)
		}
	}
}

type topicWatch struct {
	roster   func(*rosterSnap)
	linkLost func()
}

// members returns topic's cached roster (never nil).
func (c *Cluster) members(topic string) map[string]room.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.rosters[topic]; s != nil {
		return s.members
	}
	return map[string]room.Member{}
}

// claim makes conn participant p's connection in topic, cluster-wide: the
// newer connection wins. It fails with room.ErrTopicFull when the topic has max
// other participants. It returns the entry it replaced, if any, and the
// roster it wrote.
func (c *Cluster) claim(ctx context.Context, topic string, p mcpx.Participant, conn string, max int) (old *room.Member, snap *rosterSnap, err error) {
	snap, err = c.update(ctx, topic, func(ms map[string]room.Member) (bool, error) {
		old = nil
		if m, ok := ms[p.ID]; ok {
			old = &m
		} else if len(ms) >= max {
			return false, room.ErrTopicFull
		}
		ms[p.ID] = room.Member{Node: c.node, Conn: conn, P: p}
		return true, nil
	})
	return old, snap, err
}

// release removes participant id from topic's roster if conn is still its
// connection, and reports whether it did.
func (c *Cluster) release(ctx context.Context, topic, id, conn string) (bool, error) {
	removed := false
	_, err := c.update(ctx, topic, func(ms map[string]room.Member) (bool, error) {
		removed = false
		if m, ok := ms[id]; ok && m.Conn == conn {
			delete(ms, id)
			removed = true
		}
		return removed, nil
	})
	return removed, err
}

// leave removes a participant's entry (if conn still holds it) and tells
// the topic. While NATS is down the removal is retried until it comes
// back, so that nobody stays in the roster for ever.
func (c *Cluster) leave(ctx context.Context, topic string, p mcpx.Participant, conn string, why mcpx.LeaveReason) {
	removed, err := c.release(ctx, topic, p.ID, conn)
	if err != nil {
		c.log.Warn("roster entry not removed; retrying when NATS answers", "topic", topic, "participant", p.ID, "err", err)
		c.mu.Lock()
		c.retries = append(c.retries, pendingLeave{topic, p, conn, why})
		c.mu.Unlock()
		return
	}
	if removed {
		e := room.PresenceEnvelope(time.Now(), mcpx.PresenceLeave, p, why)
		if err := c.Publish(ctx, room.Delivery{Topic: topic, Frame: e.AppendJSON(nil)}); err != nil {
			c.log.Warn("leave not published", "topic", topic, "participant", p.ID, "err", err)
		}
	}
}

type pendingLeave struct {
	topic string
	p     mcpx.Participant
	conn  string
	why   mcpx.LeaveReason
}

// retryLeaves runs the removals that failed while NATS was down.
func (c *Cluster) retryLeaves(ctx context.Context) {
	c.mu.Lock()
	retries := c.retries
	c.retries = nil
	c.mu.Unlock()
	for _, r := range retries {
		c.leave(ctx, r.topic, r.p, r.conn, r.why)
	}
}
