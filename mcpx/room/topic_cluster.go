package room

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/cvmgo/cvm/mcpx"
)

// This file is a topic's life on a cluster node (Options.Cluster): the
// cluster's log orders and stores the topic's envelopes and hands them to
// every node's follower, which delivers them to that node's participants;
// the cluster's roster decides who is in the topic.

// echoWait is a participant's own envelope on its way through the cluster
// log: its echo goes out once JetStream has acknowledged the append
// (acked) and this node's follower has reached it in the topic's order
// (delivered), whichever comes last. after are the answers to the
// connection's later envelopes (errors, unknown_recipient) that must
// not overtake this echo. Guarded by the topic's echoMu.
type echoWait struct {
	s         *session
	pub       uint64
	acked     bool
	failed    bool
	delivered bool
	held      *slot
	frame     []byte
	after     [][]byte
}

// answerLocked sends frames, the answers to s's envelope pub, after the
// echoes of s's earlier envelopes that have not gone out yet, so that a
// connection gets its answers in the order of its envelopes although
// errors are known at once and echoes only when the follower reaches
// them. But an echo JetStream acknowledged waits for the follower alone,
// and the follower needs the link to NATS: while the link is down, frames
// do not wait behind such an echo (see linkLost), or the connection would
// hear nothing, not even unavailable, until NATS is back. echoMu must be
// held.
func (t *topic) answerLocked(s *session, pub uint64, frames ...[]byte) {
	for i := len(s.echoQ) - 1; i >= 0; i-- {
		w := s.echoQ[i]
		if w.pub >= pub {
			continue
		}
		if w.acked && !t.g.cluster.Up() {
			// The earlier ones are acknowledged too: appends end in
			// the order of the queue.
			break
		}
		w.after = append(w.after, frames...)
		return
	}
	for _, f := range frames {
		s.send(f)
	}
}

// linkLost runs when the link to NATS goes down. The echoes JetStream
// acknowledged wait for the follower, which reaches them once NATS is
// back: what waits behind them goes out now, and from now on, while the
// link is down, nothing waits behind them (answerLocked). So a connection
// hears unavailable for its envelopes at once during an outage, ahead of
// the echoes of the envelopes stored just before it.
func (t *topic) linkLost() {
	t.echoMu.Lock()
	defer t.echoMu.Unlock()
	seen := map[*session]bool{}
	for _, w := range t.echoes {
		if seen[w.s] {
			continue
		}
		seen[w.s] = true
		// In the connection's order: its acknowledged echoes come first
		// (appends end in order).
		for _, x := range w.s.echoQ {
			if !x.acked {
				break
			}
			sendAfterLocked(x)
		}
	}
}

// sendAfterLocked sends what waits behind w's echo now, ahead of it.
// echoMu must be held.
func sendAfterLocked(w *echoWait) {
	for _, f := range w.after {
		w.s.send(f)
	}
	w.after = nil
}

// echoGoneLocked takes w off its connection's echoes to come and returns
// what waited for it. echoMu must be held.
func echoGoneLocked(w *echoWait) [][]byte {
	s := w.s
	if i := slices.Index(s.echoQ, w); i >= 0 {
		s.echoQ = slices.Delete(s.echoQ, i, i+1)
	}
	after := w.after
	w.after = nil
	return after
}

func newConnID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// followCluster starts following the topic's log and roster. g.mu is held.
func (t *topic) followCluster() error {
	c := t.g.cluster
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, stopLog, err := c.follow(ctx, t.name, t.deliverEntry)
	if err != nil {
		return fmt.Errorf("mcpx: follow %s: %w", t.name, err)
	}
	t.delivered.Store(last)
	stopWatch := c.watchTopic(t.name, t.rosterChanged, t.linkLost)
	unsub := t.unsubscribe
	t.unsubscribe = func() {
		stopWatch()
		stopLog()
		unsub()
	}
	return nil
}

// admitCluster claims participant p's place in the topic for connection
// conn, cluster-wide, before the upgrade. It returns the entry it
// replaced (an older connection of p, on any node).
func (t *topic) admitCluster(ctx context.Context, p mcpx.Participant, conn string) (*member, error) {
	old, _, err := t.g.cluster.claim(ctx, t.name, p, conn, t.g.opts.MaxParticipants)
	return old, err
}

// rosterChanged runs (from the cluster's watcher) when another node changed
// the roster: local connections that are no longer their participant's,
// because a newer one took over elsewhere or a node swept them out, are
// closed without a leave of their own (the node that changed the roster
// published it).
func (t *topic) rosterChanged(snap *rosterSnap) {
	t.mu.Lock()
	var gone []*session
	for id, s := range t.members {
		if m, ok := snap.members[id]; !ok || m.Conn != s.connID {
			t.setMember(id, nil)
			gone = append(gone, s)
		}
	}
	t.mu.Unlock()
	for _, s := range gone {
		s.log.Info("participant connected again on another node; old connection replaced")
		s.close(closeNormal, "Duplicate connection - disconnecting old session", mcpx.LeaveReplaced)
	}
}

// joinCluster is join on a cluster node.
func (t *topic) joinCluster(ctx context.Context, s *session) error {
	welcome, err := t.joinClusterLocked(ctx, s)
	if err != nil || welcome == nil {
		return err
	}
	return welcome()
}

// joinClusterLocked does joinCluster's work under mu. The reference
// welcome carries a history tail, read from JetStream: it is returned for
// joinCluster to build after mu is released, in a slot of the joiner's
// order that holds back whatever comes after it.
func (t *topic) joinClusterLocked(ctx context.Context, s *session) (welcome func() error, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := s.p.ID
	s.limiter = t.limiter(id)
	if old := t.members[id]; old != nil {
		t.setMember(id, nil)
		old.close(closeNormal, "Duplicate connection - disconnecting old session", mcpx.LeaveReplaced)
	}
	if s.replaced != nil {
		// Published here, by the node of the newer connection, so that
		// every roster built from presence sees the leave before the join.
		// Presence travels through NATS and arrives after the welcome: the
		// new connection, which never saw the old one, is left out.
		t.publishPresence(ctx, mcpx.PresenceLeave, s.replaced.P, mcpx.LeaveReplaced, id)
		t.g.log.Info("participant reconnected; old connection replaced", "topic", t.name, "participant", id, "old_node", s.replaced.Node)
	}
	if t.g.opts.Compat == CompatReference {
		// The reference sends the joiner's join to everyone, the joiner
		// included, then the welcome. Presence reaches this node through
		// NATS only after the welcome and after live envelopes, so the
		// joiner's copy is queued here, first, and the same envelope goes
		// to everyone else through NATS.
		join := presenceEnvelope(t.g.opts.Now(), mcpx.PresenceJoin, s.p, "").AppendJSON(nil)
		t.rosterMu.Lock()
		_, had := t.members[id]
		t.members[id] = s
		latest := t.delivered.Load() // the tail ends here; later envelopes arrive live
		s.send(join)
		place := s.hold()
		t.rosterMu.Unlock()
		if !had {
			t.g.metrics.participants.Inc()
		}
		if err := t.g.broker.Publish(ctx, Delivery{Topic: t.name, Frame: join, Except: id}); err != nil {
			t.g.log.Error("presence not published", "topic", t.name, "event", mcpx.PresenceJoin, "participant", id, "err", err)
		}
		return func() error {
			w, err := t.referenceWelcome(ctx, s, latest)
			if err != nil {
				s.fill(place)
				return err
			}
			s.fill(place, w)
			return nil
		}, nil
	}
	info := mcpx.HistoryInfo{Enabled: true, Limit: t.g.opts.HistoryPageLimit}
	// Under rosterMu, which the follower holds while it delivers: the
	// welcome's latest_seq is exactly the last envelope the joiner will
	// not receive live.
	t.rosterMu.Lock()
	_, had := t.members[id]
	t.members[id] = s
	info.LatestSeq = t.delivered.Load()
	w := mcpx.Welcome{
		Event:        "welcome",
		Participant:  s.p,
		Participants: t.g.cluster.participants(t.name, id),
		History:      info,
		Protocol:     mcpx.Protocol,
	}
	s.send(gatewayEnvelope(t.g.opts.Now(), mcpx.KindSystem, nil, "", w).AppendJSON(nil))
	t.rosterMu.Unlock()
	if !had {
		t.g.metrics.participants.Inc()
	}
	t.publishPresence(ctx, mcpx.PresenceJoin, s.p, "", id)
	return nil, nil
}

// leaveCluster is leave on a cluster node: the participant's roster entry
// goes (if it is still this connection's) and the others are told.
func (t *topic) leaveCluster(ctx context.Context, s *session, why mcpx.LeaveReason) {
	t.mu.Lock()
	if t.members[s.p.ID] != s {
		t.mu.Unlock()
		return
	}
	t.setMember(s.p.ID, nil)
	if l := t.limiters[s.p.ID]; l != nil && l.Tokens() >= float64(t.g.opts.RateBurst) {
		delete(t.limiters, s.p.ID)
	}
	t.mu.Unlock()
	if why == mcpx.LeaveShutdown {
		// This gateway is stopping, not the participant leaving: its
		// client reconnects to another node, whose new connection
		// replaces this entry (the others see "replaced", which ends
		// nothing of theirs with it, calls in flight included). One that
		// does not come back within NodeTimeout is reported left
		// (timeout): by this node's sweep if its Cluster lives on, else by
		// the other nodes' dead-node sweep, as if this node had died.
		t.g.cluster.orphan(t.name, s.p, s.connID)
		return
	}
	t.g.cluster.leave(ctx, t.name, s.p, s.connID, why)
}

// publishCluster is publish on a cluster node: the envelope is queued for
// the topic's appender, which gives it its seq and stores it in the next
// JetStream message; every node's follower delivers it, in the log's
// order. It returns as soon as the envelope is queued, so the read loop
// goes on reading: a connection may have Options.MaxUncommitted envelopes
// and maxFlightBytes waiting for JetStream, and its read loop waits here
// beyond either (the backpressure, through TCP, on this publisher only).
// The answer comes once JetStream acknowledged the envelope, or failed
// to: the sender's copy (held, like any echo, until the follower reached
// it too), an unknown_recipient, or the error envelope (session.answer),
// in the order of the connection's envelopes (answerLocked).
func (t *topic) publishCluster(s *session, e *mcpx.Envelope) {
	c := t.g.cluster
	size := len(e.Payload) + 192 + len(e.ID) + len(e.CorrelationID)
	if s.takeWindow() != nil {
		return // the connection is closing: nobody to answer
	}
	if s.reserveFlight(size) != nil {
		<-s.window
		return
	}
	refuse := func(err error) {
		s.releaseFlight(size)
		<-s.window
		if f := s.answer(e, nil, err); f != nil {
			t.echoMu.Lock()
			t.answerLocked(s, math.MaxUint64, f)
			t.echoMu.Unlock()
		}
	}
	if !c.Up() {
		refuse(ErrUnavailable)
		return
	}
	t.rosterMu.RLock()
	current := t.members[s.p.ID] == s
	t.rosterMu.RUnlock()
	if !current {
		refuse(errReplaced)
		return
	}
	d := Delivery{Topic: t.name}
	own := e.Broadcast()
	switch {
	case e.Broadcast():
	case t.g.opts.Visibility != VisibilityTopic:
		d.To = e.To
		own = slices.Contains(e.To, e.From)
	default:
		d.Except = e.From
	}
	pub := t.g.pubs.Add(1)
	var w *echoWait
	if own {
		w = &echoWait{s: s, pub: pub}
		t.echoMu.Lock()
		t.echoes[pub] = w
		s.echoQ = append(s.echoQ, w)
		t.echoMu.Unlock()
	}
	s.appending.Add(1)
	c.enqueueAppend(t.name, &appendReq{
		d: d, id: e.ID, from: e.From, pub: pub,
		encode: func(seq uint64) []byte {
			e.Seq = seq
			return e.AppendJSON(make([]byte, 0, size))
		},
		done: func(_ uint64, err error) {
			defer s.appending.Done()
			var absent []string
			if err == nil {
				present := c.members(t.name)
				for _, r := range e.To {
					if _, ok := present[r]; !ok {
						absent = append(absent, r)
					}
				}
			}
			s.releaseFlight(size)
			<-s.window
			var answer [][]byte
			if f := s.answer(e, absent, err); f != nil {
				answer = [][]byte{f}
			}
			t.echoMu.Lock()
			defer t.echoMu.Unlock()
			switch {
			case w == nil:
				t.answerLocked(s, pub, answer...)
			case err == nil:
				w.acked = true
				if w.delivered {
					delete(t.echoes, pub)
				}
				if w.held == nil {
					// The follower sends the echo when it reaches it,
					// and the answer after it; once NATS is back if the
					// link is down now, so then nothing waits for it
					// (answerLocked).
					w.after = append(answer, w.after...)
					if !c.Up() {
						sendAfterLocked(w)
					}
					return
				}
				// The follower reached it first and held its place.
				s.fill(w.held, append(append([][]byte{w.frame}, answer...), echoGoneLocked(w)...)...)
			default:
				// No echo: the error (after the earlier echoes), then
				// what waited for this one.
				w.failed = true
				delete(t.echoes, pub)
				if w.held != nil {
					s.fill(w.held)
				}
				t.answerLocked(s, pub, append(answer, echoGoneLocked(w)...)...)
			}
		},
	})
}

// deliverEntry queues an entry of the topic's log for its local
// recipients; the cluster's follower calls it, in log order.
func (t *topic) deliverEntry(e entry) {
	t.rosterMu.RLock()
	defer t.rosterMu.RUnlock()
	t.delivered.Store(e.Seq)
	var w *echoWait
	if e.Node == t.g.cluster.node {
		t.echoMu.Lock()
		if w = t.echoes[e.Pub]; w != nil {
			w.delivered = true
			if w.acked {
				delete(t.echoes, e.Pub)
			}
		}
		t.echoMu.Unlock()
	}
	send := func(s *session) {
		if w != nil && s == w.s {
			t.echoMu.Lock()
			defer t.echoMu.Unlock()
			switch {
			case w.failed:
				// Stored although its append reported a failure (the
				// acknowledgement was lost): delivered, not an echo.
			case !w.acked:
				w.held, w.frame = s.hold(), e.Frame
				return
			default:
				s.send(e.Frame)
				for _, f := range echoGoneLocked(w) {
					s.send(f)
				}
				return
			}
		}
		s.send(e.Frame)
	}
	n := 0
	if e.To == nil {
		for id, s := range t.members {
			if id != e.Except {
				send(s)
				n++
			}
		}
	} else {
		seen := map[string]bool{}
		for _, id := range e.To {
			if s := t.members[id]; s != nil && id != e.Except && !seen[id] {
				seen[id] = true
				send(s)
				n++
			}
		}
	}
	t.g.metrics.deliveries.Add(float64(n))
}

// participants lists topic's participants cluster-wide, sorted by id,
// leaving out except.
func (c *Cluster) participants(topic, except string) []mcpx.Participant {
	ms := c.members(topic)
	out := make([]mcpx.Participant, 0, len(ms))
	for id, m := range ms {
		if id != except {
			out = append(out, m.P)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
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
		e := presenceEnvelope(time.Now(), mcpx.PresenceLeave, p, why)
		if err := c.Publish(ctx, Delivery{Topic: topic, Frame: e.AppendJSON(nil)}); err != nil {
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
		e := presenceEnvelope(time.Now(), mcpx.PresenceLeave, o.p, mcpx.LeaveTimeout)
		if err := c.Publish(ctx, Delivery{Topic: o.topic, Frame: e.AppendJSON(nil)}); err != nil {
			c.log.Warn("leave not published", "topic", o.topic, "participant", o.p.ID, "err", err)
		}
	}
}
