package roomnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go/jetstream"
)

// A topic's roster is one key of the bucket, changed by compare-and-set.
// Written one change at a time, n participants joining or leaving a topic
// together would cost n writes of a value that grows with n, each retried
// on the others' writes: quadratic. So, as the log's appends do, a node
// commits its changes of a topic in groups: one writer per topic (a
// goroutine while changes are queued, owned by the Cluster) applies every
// change queued during its last write to the roster it reads, in order,
// and writes the result once.

// rosterQueue is what waits for a topic's roster writer.
type rosterQueue struct {
	pending []*rosterChange
	writing bool // a writer goroutine is running for the topic
}

// rosterChange is one change of a roster and, once written, its outcome.
type rosterChange struct {
	// change edits the roster and reports whether it changed it. It may
	// be called again on a newer roster (after a conflict), so it must
	// start afresh each time; when it returns an error it must leave the
	// roster as it found it.
	change func(map[string]room.Member) (bool, error)
	snap   *rosterSnap // the roster written (or read, if nothing changed)
	err    error       // the change's own, or else the write's
	done   chan struct{}
}

// maxRosterGroup bounds the changes written together.
const maxRosterGroup = 512

// update applies change to topic's roster with compare-and-set, together
// with the changes of the topic queued with it on this node, retrying on
// conflicts. change returns false to leave the roster as it is. It
// returns the roster as written, which holds every change of the group.
// The write does not depend on ctx: once queued, a change is written or
// fails on its own (a claim given up half-way would otherwise land
// unseen); ctx only refuses it before it is queued.
func (c *Cluster) update(ctx context.Context, topic string, change func(map[string]room.Member) (bool, error)) (*rosterSnap, error) {
	if !c.Up() {
		return nil, room.ErrUnavailable
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rc := &rosterChange{change: change, done: make(chan struct{})}
	c.rosterMu.Lock()
	if c.rosterClosed {
		c.rosterMu.Unlock()
		return nil, fmt.Errorf("roster %s: %w: the node is closing", topic, room.ErrUnavailable)
	}
	q := c.rosterQs[topic]
	if q == nil {
		q = &rosterQueue{}
		c.rosterQs[topic] = q
	}
	q.pending = append(q.pending, rc)
	if !q.writing {
		q.writing = true
		c.rosterWriters.Go(func() { c.writeRosters(topic, q) })
	}
	c.rosterMu.Unlock()
	<-rc.done
	return rc.snap, rc.err
}

// writeRosters writes topic's queued changes, in groups, until none is
// left; then the topic's queue is forgotten.
func (c *Cluster) writeRosters(topic string, q *rosterQueue) {
	for {
		c.rosterMu.Lock()
		if len(q.pending) == 0 {
			q.writing = false
			delete(c.rosterQs, topic)
			c.rosterMu.Unlock()
			return
		}
		n := min(len(q.pending), maxRosterGroup)
		group := q.pending[:n:n]
		q.pending = q.pending[n:]
		c.rosterMu.Unlock()
		snap, err := c.writeRoster(c.ctx, topic, group)
		for _, rc := range group {
			rc.snap = snap
			if rc.err == nil {
				rc.err = err
			}
			close(rc.done)
		}
	}
}

// writeRoster applies group, in order, to topic's roster and writes it
// once. A change that fails keeps its error in its own entry; the error
// returned is the write's, for the others.
func (c *Cluster) writeRoster(ctx context.Context, topic string, group []*rosterChange) (*rosterSnap, error) {
	if !c.Up() {
		return nil, room.ErrUnavailable
	}
	key := rosterKey(topic)
	for range 64 {
		var rev uint64
		members := map[string]room.Member{}
		e, err := c.roster.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("roster %s: %w", topic, err)
		default:
			rev = e.Revision()
			if len(e.Value()) > 0 {
				if err := json.Unmarshal(e.Value(), &members); err != nil {
					return nil, fmt.Errorf("roster %s: %w", topic, err)
				}
			}
		}
		changed := false
		for _, rc := range group {
			ok, err := rc.change(members)
			rc.err = err // its own outcome, kept by writeRosters
			changed = changed || (ok && err == nil)
		}
		if !changed {
			return &rosterSnap{rev: rev, members: members}, nil
		}
		val, err := json.Marshal(members)
		if err != nil {
			return nil, err
		}
		if len(val) > c.rosterMax() {
			// Too big for one message: the group again, one change at a
			// time, refusing those that leave the roster too big. A
			// release only shrinks it, so it never is refused.
			if e != nil && len(e.Value()) > 0 {
				clear(members)
				if err := json.Unmarshal(e.Value(), &members); err != nil {
					return nil, fmt.Errorf("roster %s: %w", topic, err)
				}
			} else {
				members = map[string]room.Member{}
			}
			if val, err = c.fitRoster(members, group); err != nil {
				return nil, err
			}
		}
		if rev == 0 {
			rev, err = c.roster.Create(ctx, key, val)
		} else {
			rev, err = c.roster.Update(ctx, key, val, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
			c.stats.rosterConflicts.Add(1)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("roster %s: %w", topic, err)
		}
		c.stats.rosterWrites.Add(1)
		snap := &rosterSnap{rev: rev, members: members}
		c.apply(topic, snap, false)
		return snap, nil
	}
	return nil, fmt.Errorf("roster %s: too much contention", topic)
}

// rosterMax is the largest roster value a write may carry.
func (c *Cluster) rosterMax() int {
	if c.opts.rosterMax > 0 {
		return c.opts.rosterMax
	}
	return int(c.conn.NC.MaxPayload()) - 4096
}

// fitRoster applies group to members one change at a time, undoing and
// refusing (room.ErrRosterFull) each that leaves the roster larger than
// rosterMax, and returns the roster encoded. It is the slow path of a
// topic at its size limit: an encoding per change.
func (c *Cluster) fitRoster(members map[string]room.Member, group []*rosterChange) ([]byte, error) {
	val, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	for _, rc := range group {
		before := maps.Clone(members)
		ok, err := rc.change(members)
		rc.err = err
		if err != nil || !ok {
			continue
		}
		next, err := json.Marshal(members)
		if err != nil {
			return nil, err
		}
		if len(next) > c.rosterMax() {
			clear(members)
			maps.Copy(members, before)
			rc.err = room.ErrRosterFull
			continue
		}
		val = next
	}
	return val, nil
}
