package roomnats

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/nats-io/nats.go/jetstream"
)

// trimLoop runs trim every MaxAge/10 (between 100 ms and 1 min) on the node
// that leads the trimming, until ctx ends.
func (c *Cluster) trimLoop(ctx context.Context) {
	every := min(max(c.opts.MaxAge/10, 100*time.Millisecond), time.Minute)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !c.Up() || !c.trimLeader() {
			continue
		}
		if n, err := c.trim(ctx, time.Now().Add(-c.opts.MaxAge)); err != nil {
			c.log.Warn("history trim by age stopped; next try in a while", "err", err, "topics_trimmed", n)
		}
	}
}

// trimLeader reports whether this node trims: the one with the smallest
// name of the nodes heard from within NodeTimeout. Two nodes that both
// believe they lead (for a moment after a death) purge the same messages,
// which is harmless.
func (c *Cluster) trimLeader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for n, last := range c.seen {
		if n < c.node && now.Sub(last) <= c.opts.NodeTimeout {
			return false
		}
	}
	return true
}

// trim purges, topic by topic, the messages received before cutoff, but
// never a topic's newest message: its next seq is read from it. Per topic
// it costs one direct get when nothing is too old, else a binary search
// (O(log n) direct gets) and one purge. It returns how many topics it
// purged.
func (c *Cluster) trim(ctx context.Context, cutoff time.Time) (int, error) {
	info, err := c.stream.Info(ctx, jetstream.WithSubjectFilter(logPrefix+">"))
	if err != nil {
		return 0, fmt.Errorf("mcpx cluster: trim: %w", err)
	}
	n := 0
	for subj, count := range info.State.Subjects {
		if count < 2 {
			continue // a topic's only message is its newest
		}
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(subj, logPrefix))
		if err != nil {
			continue
		}
		topic := string(b)
		first, ok, err := c.nextOf(ctx, topic, 1)
		if err != nil {
			return n, err
		}
		if !ok || !first.recs[0].Received.Before(cutoff) {
			continue
		}
		_, lastStream, err := c.last(ctx, topic)
		if err != nil {
			return n, err
		}
		keep := lastStream // purge everything before the newest...
		fresh, ok, err := c.search(ctx, topic, lastStream, func(r history.Record) bool { return !r.Received.Before(cutoff) })
		if err != nil {
			return n, err
		}
		if ok {
			keep = min(keep, fresh.streamSeq) // ...or before the first young enough
		}
		if err := c.stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(keep)); err != nil {
			return n, fmt.Errorf("mcpx cluster: trim %s: %w", topic, err)
		}
		n++
	}
	return n, nil
}
