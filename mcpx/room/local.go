package room

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
)

// localBackend is the Backend of a gateway alone in its process: the
// roster is a map, the log is a lock per topic in front of the
// HistoryStore (nil: no history, no seqs), delivery is a call to the
// topic's followers, and presence goes through a LocalBroker.
type localBackend struct {
	*LocalBroker
	hist HistoryStore
	now  func() time.Time
	log  *slog.Logger

	mu     sync.Mutex
	topics map[string]*localTopic
}

// localTopic is one topic's roster and log. mu puts its appends in one
// order, which is the order its followers get them in. rosterMu guards
// members, and is held while a leave is published so that the leave of
// a connection comes before the join of the one that replaces it;
// members is copied on write, so that Members hands it out as it is.
type localTopic struct {
	mu        sync.Mutex
	followers []Follower

	rosterMu sync.Mutex
	members  map[string]Member
}

func newLocalBackend(hist HistoryStore, now func() time.Time, log *slog.Logger) *localBackend {
	return &localBackend{LocalBroker: NewLocalBroker(), hist: hist, now: now, log: log, topics: map[string]*localTopic{}}
}

func (b *localBackend) topic(name string) *localTopic {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[name]
	if t == nil {
		t = &localTopic{members: map[string]Member{}}
		b.topics[name] = t
	}
	return t
}

// History implements Backend.
func (b *localBackend) History() HistoryReader {
	if b.hist == nil {
		return nil
	}
	return b.hist
}

// Node implements Backend: one process, no name needed.
func (b *localBackend) Node() string { return "" }

// Up implements Backend: the process is always there.
func (b *localBackend) Up() bool { return true }

// Claim implements Roster.
func (b *localBackend) Claim(_ context.Context, topic string, p mcpx.Participant, conn string, max int) (*Member, error) {
	t := b.topic(topic)
	t.rosterMu.Lock()
	defer t.rosterMu.Unlock()
	var old *Member
	if m, ok := t.members[p.ID]; ok {
		old = &m
	} else if len(t.members) >= max {
		return nil, ErrTopicFull
	}
	ms := maps.Clone(t.members)
	ms[p.ID] = Member{Conn: conn, P: p}
	t.members = ms
	return old, nil
}

// Release implements Roster.
func (b *localBackend) Release(_ context.Context, topic, id, conn string) error {
	t := b.topic(topic)
	t.rosterMu.Lock()
	defer t.rosterMu.Unlock()
	t.releaseLocked(id, conn)
	return nil
}

func (t *localTopic) releaseLocked(id, conn string) bool {
	if m, ok := t.members[id]; ok && m.Conn == conn {
		ms := maps.Clone(t.members)
		delete(ms, id)
		t.members = ms
		return true
	}
	return false
}

// Leave implements Roster. On one node a gateway that stops takes its
// roster with it: the entry just goes.
func (b *localBackend) Leave(ctx context.Context, topic string, p mcpx.Participant, conn string, why mcpx.LeaveReason) {
	t := b.topic(topic)
	t.rosterMu.Lock()
	defer t.rosterMu.Unlock()
	if !t.releaseLocked(p.ID, conn) || why == mcpx.LeaveShutdown {
		return
	}
	if err := b.Publish(ctx, Delivery{Topic: topic, Frame: PresenceEnvelope(b.now(), mcpx.PresenceLeave, p, why).AppendJSON(nil)}); err != nil {
		b.log.Error("presence not published", "topic", topic, "event", mcpx.PresenceLeave, "participant", p.ID, "err", err)
	}
}

// Members implements Roster.
func (b *localBackend) Members(topic string) map[string]Member {
	b.mu.Lock()
	t := b.topics[topic]
	b.mu.Unlock()
	if t == nil {
		return map[string]Member{}
	}
	t.rosterMu.Lock()
	defer t.rosterMu.Unlock()
	return t.members
}

// Follow implements Log.
func (b *localBackend) Follow(_ context.Context, topic string, f Follower) (uint64, func(), error) {
	t := b.topic(topic)
	t.mu.Lock()
	defer t.mu.Unlock()
	var last uint64
	if b.hist != nil {
		var err error
		if last, err = b.hist.LatestSeq(topic); err != nil {
			return 0, nil, fmt.Errorf("history: %w", err)
		}
	}
	t.followers = append(t.followers, f)
	return last, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		for i, x := range t.followers {
			if x == f {
				t.followers = append(t.followers[:i:i], t.followers[i+1:]...)
				break
			}
		}
	}, nil
}

// Append implements Log: under the topic's lock the envelope gets the
// next seq, goes to the commit queue and is delivered at once (it is
// placed when Append returns); it is done when history has committed it. Waiting for room in the commit
// queue happens before the lock, so a full queue pushes back only this
// publisher, never the topic.
func (b *localBackend) Append(ctx context.Context, topic string, a *Append) {
	defer a.Placed() // delivered, or refused: in order either way
	h := b.hist
	if h != nil {
		if err := h.Reserve(ctx); err != nil {
			if ctx.Err() != nil {
				err = errEnding
			}
			a.Done(0, err)
			return
		}
	}
	t := b.topic(topic)
	t.mu.Lock()
	var seq uint64
	if h != nil {
		var err error
		if seq, err = h.NextSeq(topic); err != nil {
			t.mu.Unlock()
			h.Release()
			a.Done(0, fmt.Errorf("sequence: %w", err))
			return
		}
	}
	frame := a.Encode(seq)
	if h != nil {
		rec := history.Record{Seq: seq, ID: a.ID, From: a.From, To: a.Recipients, Received: b.now(), Data: frame}
		err := h.Append(topic, rec, func(err error) {
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrNotStored, err)
			}
			a.Done(seq, err)
		})
		if err != nil { // Append gave the queue's place back
			t.mu.Unlock()
			a.Done(0, fmt.Errorf("history: %w", err))
			return
		}
	}
	d := a.Delivery
	d.Topic, d.Frame = topic, frame
	for _, f := range t.followers {
		f.Deliver(Entry{Delivery: d, Seq: seq, From: a.From, Pub: a.Pub})
	}
	t.mu.Unlock()
	if h == nil {
		a.Done(seq, nil) // nothing to wait for
	}
}

// participants lists members' participants, sorted by id, leaving out
// except.
func participants(members map[string]Member, except string) []mcpx.Participant {
	out := make([]mcpx.Participant, 0, len(members))
	for id, m := range members {
		if id != except {
			out = append(out, m.P)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
