package roomnats

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bounds of one JetStream message of the log: at most maxBatch envelopes,
// and the connection's largest payload less batchHeaderRoom for the
// headers and batchSeqRoom per envelope (a batch encoded again after a
// conflict has larger seqs, a few bytes longer each).
const (
	maxBatch        = 256
	batchHeaderRoom = 4096
	batchSeqRoom    = 24
)

// topicSeq is this node's appender of a topic: what waits for the next
// append, and this node's view of the end of the topic's log.
type topicSeq struct {
	mu      sync.Mutex
	queue   []*room.Append
	running bool // an appender goroutine owns the fields below

	loaded     bool
	last       uint64 // the topic's last seq
	lastStream uint64 // the stream sequence of the message holding it
}

// enqueueAppend hands r to topic's appender and returns at once. The
// appender (one goroutine per topic while there is something to append,
// owned by the Cluster) puts everything that queued while an append was
// in flight into the next JetStream message, in queue order: a group
// commit, one message of up to maxBatch envelopes with consecutive seqs,
// guarded by Nats-Expected-Last-Subject-Sequence like a single one.
func (c *Cluster) enqueueAppend(topic string, r *room.Append) {
	c.seqMu.Lock()
	if c.closed {
		c.seqMu.Unlock()
		r.Done(0, fmt.Errorf("%w: the node is closing", room.ErrUnavailable))
		return
	}
	ts := c.seqs[topic]
	if ts == nil {
		ts = &topicSeq{}
		c.seqs[topic] = ts
	}
	ts.mu.Lock()
	ts.queue = append(ts.queue, r)
	start := !ts.running
	ts.running = true
	ts.mu.Unlock()
	if start {
		c.appenders.Go(func() { c.runAppender(topic, ts) })
	}
	c.seqMu.Unlock()
}

// runAppender appends what queues for topic until the queue is empty.
func (c *Cluster) runAppender(topic string, ts *topicSeq) {
	for {
		ts.mu.Lock()
		if len(ts.queue) == 0 {
			ts.queue, ts.running = nil, false
			ts.mu.Unlock()
			return
		}
		batch := ts.queue[:min(len(ts.queue), maxBatch)]
		ts.mu.Unlock()
		first, n, err := c.appendBatch(c.ctx, topic, ts, batch)
		ts.mu.Lock()
		// Whatever did not fit stays at the front of the queue.
		batch = ts.queue[:n:n]
		ts.queue = ts.queue[n:]
		ts.mu.Unlock()
		if err != nil {
			c.stats.appendFailures.Add(uint64(n))
		}
		for i, r := range batch {
			r.Done(first+uint64(i), err)
			batch[i] = nil // the queue's array outlives the batch
		}
	}
}

// appendBatch stores a prefix of batch (as many envelopes as fit in one
// message) under the topic's next seqs, in order, and returns the first
// seq and how many it stored, or why it failed (n is then how many
// failed). It returns once JetStream has acknowledged the message.
func (c *Cluster) appendBatch(ctx context.Context, topic string, ts *topicSeq, batch []*room.Append) (first uint64, n int, err error) {
	n = len(batch)
	if !c.Up() {
		return 0, n, room.ErrUnavailable
	}
	limit := int(c.conn.NC.MaxPayload()) - batchHeaderRoom - batchSeqRoom*maxBatch
	subj := logSubject(topic)
	var data []byte
	for range 64 {
		if !ts.loaded {
			seq, sseq, err := c.last(ctx, topic)
			if err != nil {
				return 0, n, err
			}
			ts.last, ts.lastStream, ts.loaded = seq, sseq, true
		}
		first = ts.last + 1
		m := nats.NewMsg(subj)
		if len(batch) == 1 {
			// One envelope: the format of a message of its own.
			r := batch[0]
			m.Data = r.Encode(first)
			m.Header.Set(hdrSeq, strconv.FormatUint(first, 10))
			m.Header.Set(hdrID, r.ID)
			m.Header.Set(hdrFrom, r.From)
			if r.To != nil {
				m.Header.Set(hdrTo, strings.Join(r.To, ","))
			}
			if r.Except != "" {
				m.Header.Set(hdrExcept, r.Except)
			}
			m.Header.Set(hdrPub, strconv.FormatUint(r.Pub, 10))
		} else {
			data = data[:0]
			for i, r := range batch {
				at := len(data)
				data = appendBatchRecord(data, batchRecord{ID: r.ID, From: r.From, To: r.To, Except: r.Except, Pub: r.Pub, Frame: r.Encode(first + uint64(i))})
				if i > 0 && len(data) > limit {
					// The first attempt decides the batch: later ones
					// encode the same envelopes, under batchSeqRoom.
					data, batch = data[:at], batch[:i]
					break
				}
			}
			m.Data = data
			m.Header.Set(hdrSeq, strconv.FormatUint(first, 10))
			m.Header.Set(hdrCount, strconv.Itoa(len(batch)))
		}
		n = len(batch)
		m.Header.Set(hdrNode, c.node)
		ack, err := c.pubLog(ctx, m, jetstream.WithExpectLastSequencePerSubject(ts.lastStream))
		if isWrongLastSeq(err) {
			c.stats.appendConflicts.Add(1)
			ts.loaded = false // another node appended: read the end again
			continue
		}
		if err != nil {
			// Stored or not, we cannot tell: read the end again next time.
			ts.loaded = false
			if c.unreachable(err) {
				return 0, n, fmt.Errorf("%w: %w", room.ErrUnavailable, err)
			}
			return 0, n, fmt.Errorf("mcpx cluster: append to %s: %w", topic, err)
		}
		c.stats.appends.Add(uint64(n))
		c.stats.appendMessages.Add(1)
		ts.last, ts.lastStream = first+uint64(n)-1, ack.Sequence
		return first, n, nil
	}
	return 0, n, fmt.Errorf("mcpx cluster: append to %s: too much contention", topic)
}
