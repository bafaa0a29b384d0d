package roomnats

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// msgSeqs reads the seq of a message's first envelope and how many it
// holds.
func msgSeqs(h nats.Header) (first, count uint64, err error) {
	first, err = strconv.ParseUint(h.Get(hdrSeq), 10, 64)
	if err != nil || first == 0 {
		return 0, 0, errors.New("no seq")
	}
	count = 1
	if s := h.Get(hdrCount); s != "" {
		if count, err = strconv.ParseUint(s, 10, 64); err != nil || count == 0 || first+count < first {
			return 0, 0, errors.New("bad envelope count")
		}
	}
	return first, count, nil
}

// last reads the topic's last seq and its stream sequence (0, 0: none).
func (c *Cluster) last(ctx context.Context, topic string) (seq, streamSeq uint64, err error) {
	m, err := c.stream.GetLastMsgForSubject(ctx, logSubject(topic))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		if c.unreachable(err) {
			return 0, 0, fmt.Errorf("%w: %w", room.ErrUnavailable, err)
		}
		return 0, 0, fmt.Errorf("mcpx cluster: last of %s: %w", topic, err)
	}
	first, count, err := msgSeqs(m.Header)
	if err != nil {
		return 0, 0, fmt.Errorf("mcpx cluster: message %d of %s: %w", m.Sequence, topic, err)
	}
	return first + count - 1, m.Sequence, nil
}

// follow calls deliver, in order, for every envelope appended to topic
// after this call, on whichever node, until stop is called. It returns the
// topic's last seq before the first one deliver gets.
func (c *Cluster) follow(ctx context.Context, topic string, deliver func(room.Entry)) (last uint64, stop func(), err error) {
	last, sseq, err := c.last(ctx, topic)
	if err != nil {
		return 0, nil, err
	}
	cons, err := c.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{logSubject(topic)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    sseq + 1,
	})
	if err != nil {
		return 0, nil, fmt.Errorf("mcpx cluster: follow %s: %w", topic, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		es, err := entriesFromMsg(topic, m.Headers(), m.Data())
		if err != nil {
			c.log.Error("unreadable message in the log", "topic", topic, "err", err)
			return
		}
		for _, e := range es {
			if c.opts.beforeDeliver != nil {
				c.opts.beforeDeliver(e)
			}
			deliver(e)
		}
	})
	if err != nil {
		return 0, nil, fmt.Errorf("mcpx cluster: follow %s: %w", topic, err)
	}
	return last, cc.Stop, nil
}

// entriesFromMsg reads the envelopes of one message of the log.
func entriesFromMsg(topic string, h nats.Header, data []byte) ([]room.Entry, error) {
	first, count, err := msgSeqs(h)
	if err != nil {
		return nil, err
	}
	node := h.Get(hdrNode)
	if h.Get(hdrCount) == "" {
		pub, _ := strconv.ParseUint(h.Get(hdrPub), 10, 64)
		return []room.Entry{{Delivery: deliveryFromHeaders(topic, h, data), Seq: first, From: h.Get(hdrFrom), Node: node, Pub: pub}}, nil
	}
	recs, err := decodeBatch(data, count)
	if err != nil {
		return nil, err
	}
	out := make([]room.Entry, len(recs))
	for i, r := range recs {
		out[i] = room.Entry{Delivery: room.Delivery{Topic: topic, Frame: r.Frame, To: r.To, Except: r.Except}, Seq: first + uint64(i), From: r.From, Node: node, Pub: r.Pub}
	}
	return out, nil
}
