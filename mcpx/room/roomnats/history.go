package roomnats

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go/jetstream"
)

// The rest is history.HistoryReader over the stream.

// LatestSeq implements HistoryReader.
func (c *Cluster) LatestSeq(topic string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seq, _, err := c.last(ctx, topic)
	return seq, err
}

// Topics implements HistoryReader: the topics with stored envelopes.
func (c *Cluster) Topics() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.stream.Info(ctx, jetstream.WithSubjectFilter(logPrefix+">"))
	if err != nil {
		return nil, fmt.Errorf("mcpx cluster: topics: %w", err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(subj, logPrefix))
		if err == nil {
			out = append(out, string(b))
		}
	}
	sort.Strings(out)
	return out, nil
}

// stored is one message of a topic's log: its envelopes, in seq order
// (one, or a batch), which share its stream sequence and Received time.
type stored struct {
	streamSeq uint64
	recs      []history.Record
}

// lastRec is the message's newest envelope.
func (s stored) lastRec() history.Record { return s.recs[len(s.recs)-1] }

func (c *Cluster) readMsg(m *jetstream.RawStreamMsg) (stored, error) {
	first, count, err := msgSeqs(m.Header)
	if err != nil {
		return stored{}, fmt.Errorf("mcpx cluster: message %d: %w", m.Sequence, err)
	}
	if m.Header.Get(hdrCount) == "" {
		r := history.Record{Seq: first, ID: m.Header.Get(hdrID), From: m.Header.Get(hdrFrom), Received: m.Time, Data: m.Data}
		if to := m.Header.Get(hdrTo); to != "" {
			r.To = strings.Split(to, ",")
		}
		return stored{streamSeq: m.Sequence, recs: []history.Record{r}}, nil
	}
	recs, err := decodeBatch(m.Data, count)
	if err != nil {
		return stored{}, fmt.Errorf("mcpx cluster: message %d: %w", m.Sequence, err)
	}
	s := stored{streamSeq: m.Sequence, recs: make([]history.Record, len(recs))}
	for i, r := range recs {
		s.recs[i] = history.Record{Seq: first + uint64(i), ID: r.ID, From: r.From, To: r.To, Received: m.Time, Data: r.Frame}
	}
	return s, nil
}

// nextOf returns the topic's first message at stream sequence from or
// later (ok false: none).
func (c *Cluster) nextOf(ctx context.Context, topic string, from uint64) (stored, bool, error) {
	m, err := c.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(logSubject(topic)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return stored{}, false, nil
	}
	if err != nil {
		return stored{}, false, c.readErr(err)
	}
	s, err := c.readMsg(m)
	return s, err == nil, err
}

func (c *Cluster) readErr(err error) error {
	if c.unreachable(err) {
		return fmt.Errorf("%w: %w", room.ErrUnavailable, err)
	}
	return fmt.Errorf("mcpx cluster: read history: %w", err)
}

// search returns the topic's first message, in log order, that holds an
// envelope for which pred holds; pred must be false up to some envelope
// and true from it on (so it is tested on each message's newest). It is a
// binary search over stream sequences: O(log n) direct gets.
func (c *Cluster) search(ctx context.Context, topic string, lastStream uint64, pred func(history.Record) bool) (stored, bool, error) {
	lo, hi := uint64(1), lastStream
	var found stored
	ok := false
	for lo <= hi {
		mid := lo + (hi-lo)/2
		s, exists, err := c.nextOf(ctx, topic, mid)
		if err != nil {
			return stored{}, false, err
		}
		switch {
		case !exists || s.streamSeq > hi:
			hi = mid - 1 // none of the topic's messages lies in [mid, hi]
		case pred(s.lastRec()):
			found, ok = s, true
			hi = mid - 1
		default:
			lo = s.streamSeq + 1
		}
	}
	return found, ok, nil
}

// scan calls visit for the topic's messages from stream sequence from up
// to lastStream, in order, until visit returns false.
func (c *Cluster) scan(ctx context.Context, topic string, from, lastStream uint64, visit func(stored) bool) error {
	if from > lastStream {
		return nil
	}
	cons, err := c.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{logSubject(topic)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return c.readErr(err)
	}
	it, err := cons.Messages()
	if err != nil {
		return c.readErr(err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return c.readErr(err)
		}
		md, err := m.Metadata()
		if err != nil {
			return c.readErr(err)
		}
		raw := &jetstream.RawStreamMsg{Subject: m.Subject(), Sequence: md.Sequence.Stream, Header: m.Headers(), Data: m.Data(), Time: md.Timestamp}
		s, err := c.readMsg(raw)
		if err != nil {
			return err
		}
		if !visit(s) || s.streamSeq >= lastStream {
			return nil
		}
	}
}

// Query implements HistoryReader: pages as history.Store.Query gives them.
// It sees every envelope JetStream acknowledged before it was called.
func (c *Cluster) Query(ctx context.Context, topic string, q history.Query) (history.Page, error) {
	if q.Limit <= 0 {
		return history.Page{}, nil
	}
	lastSeq, lastStream, err := c.last(ctx, topic)
	if err != nil || lastStream == 0 {
		return history.Page{}, err
	}
	cutoff := c.cutoff()
	// MaxPerTopic bounds the topic's messages, and a message may hold a
	// batch: what is served is its newest MaxPerTopic envelopes, as on
	// one node.
	floor := uint64(1)
	if m := uint64(c.opts.MaxPerTopic); c.opts.MaxPerTopic > 0 && lastSeq > m {
		floor = lastSeq - m + 1
	}
	visible := func(r history.Record) bool {
		return r.Seq >= floor && !r.Received.Before(cutoff) && (q.Visible == nil || q.Visible(r.From, r.To))
	}
	var page history.Page
	if q.After != nil {
		pred := func(r history.Record) bool { return r.Seq > q.After.Seq }
		if !q.After.Time.IsZero() {
			pred = func(r history.Record) bool { return r.Received.After(q.After.Time) }
		}
		start, ok, err := c.search(ctx, topic, lastStream, pred)
		if err != nil || !ok {
			return history.Page{}, err
		}
		var out []history.Record
		err = c.scan(ctx, topic, start.streamSeq, lastStream, func(s stored) bool {
			for _, r := range s.recs {
				if !pred(r) {
					continue // before the cursor, in the same batch
				}
				if q.Before != nil && !beforeCursor(r, q.Before) {
					return false
				}
				if visible(r) {
					out = append(out, copyRecord(r))
					if len(out) > q.Limit {
						return false
					}
				}
			}
			return true
		})
		if err != nil {
			return history.Page{}, err
		}
		if len(out) > q.Limit {
			out, page.More = out[:q.Limit], true
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		page.Records = out
		return page, nil
	}
	// Newest first below Before: walk back in windows of seqs.
	hi := lastSeq + 1
	if q.Before != nil {
		if q.Before.Time.IsZero() {
			hi = min(hi, q.Before.Seq)
		} else {
			s, ok, err := c.search(ctx, topic, lastStream, func(r history.Record) bool { return !r.Received.Before(q.Before.Time) })
			if err != nil {
				return history.Page{}, err
			}
			if ok {
				hi = s.recs[0].Seq // a batch shares one time
			}
		}
	}
	first, ok, err := c.nextOf(ctx, topic, 1)
	if err != nil || !ok {
		return history.Page{}, err
	}
	firstSeq := max(first.recs[0].Seq, floor)
	var out []history.Record // newest first
	window := uint64(q.Limit + 1)
	for hi > firstSeq && len(out) <= q.Limit {
		lo := firstSeq
		if hi > window && hi-window > lo {
			lo = hi - window
		}
		start, ok, err := c.search(ctx, topic, lastStream, func(r history.Record) bool { return r.Seq >= lo })
		if err != nil {
			return history.Page{}, err
		}
		if !ok {
			break
		}
		var chunk []history.Record
		err = c.scan(ctx, topic, start.streamSeq, lastStream, func(s stored) bool {
			for _, r := range s.recs {
				if r.Seq >= hi {
					return false
				}
				if r.Seq >= lo && visible(r) {
					chunk = append(chunk, copyRecord(r))
				}
			}
			return true
		})
		if err != nil {
			return history.Page{}, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			out = append(out, chunk[i])
		}
		hi = lo
		window *= 2
	}
	if len(out) > q.Limit {
		out, page.More = out[:q.Limit], true
	}
	page.Records = out
	return page, nil
}

func beforeCursor(r history.Record, c *history.Cursor) bool {
	if c.Time.IsZero() {
		return r.Seq < c.Seq
	}
	return r.Received.Before(c.Time)
}

func copyRecord(r history.Record) history.Record {
	r.Data = append([]byte(nil), r.Data...)
	return r
}

// Lookup implements HistoryReader: the newest envelope with id that
// visible admits. It reads the topic's history backwards.
func (c *Cluster) Lookup(ctx context.Context, topic, id string, visible func(from string, to []string) bool) (uint64, bool, error) {
	var before *history.Cursor
	for {
		page, err := c.Query(ctx, topic, history.Query{Limit: 1000, Before: before, Visible: visible})
		if err != nil {
			return 0, false, err
		}
		for _, r := range page.Records {
			if r.ID == id {
				return r.Seq, true, nil
			}
		}
		if !page.More || len(page.Records) == 0 {
			return 0, false, nil
		}
		before = history.AtSeq(page.Records[len(page.Records)-1].Seq)
	}
}

// cutoff is the time before which envelopes are too old to serve (the
// zero time: none is).
func (c *Cluster) cutoff() time.Time {
	if c.opts.MaxAge <= 0 {
		return time.Time{}
	}
	return time.Now().Add(-c.opts.MaxAge)
}
