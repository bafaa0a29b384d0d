package room

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"golang.org/x/time/rate"
)

var (
	errTopicFull = errors.New("topic full")
	// errRosterFull: the topic's roster, on a cluster, would not fit in one
	// NATS message.
	errRosterFull = errors.New("the topic's roster has reached the NATS message size limit")
	errReplaced   = errors.New("connection replaced")
)

// topic is one room on this gateway node: its roster of local connections
// and the lock that puts its envelopes in one order.
//
// mu serializes everything that must be seen in the same order by every
// participant: sequence numbers, history appends, publishes, joins and
// leaves. rosterMu guards members for deliver, which the broker calls
// (in-process, from a goroutine already holding mu); members changes only
// with both held.
type topic struct {
	g           *Gateway
	name        string
	unsubscribe func()

	mu       sync.Mutex
	pending  map[string]int           // admitted connections that have not joined yet, per participant
	limiters map[string]*rate.Limiter // per participant id; outlive connections

	rosterMu sync.RWMutex
	members  map[string]*session

	// On a cluster node: the seq of the last log entry delivered, and the
	// participants' own envelopes waiting for their echo, by append number.
	delivered atomic.Uint64
	echoMu    sync.Mutex
	echoes    map[uint64]*echoWait
}

func newTopic(g *Gateway, name string) *topic {
	return &topic{g: g, name: name, members: map[string]*session{}, limiters: map[string]*rate.Limiter{}, pending: map[string]int{}, echoes: map[uint64]*echoWait{}}
}

func (t *topic) size() int {
	t.rosterMu.RLock()
	defer t.rosterMu.RUnlock()
	return len(t.members)
}

// admit reserves a place for participant id, before the WebSocket upgrade,
// so that a full topic is refused with an HTTP status. A participant
// replacing its own connection needs no new place.
func (t *topic) admit(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Places are per participant: present or on its way in, counted once.
	n := len(t.members)
	for p := range t.pending {
		if t.members[p] == nil {
			n++
		}
	}
	if t.members[id] != nil || t.pending[id] > 0 {
		n--
	}
	if n >= t.g.opts.MaxParticipants {
		return errTopicFull
	}
	t.pending[id]++
	return nil
}

// release gives back a place admit reserved for a connection that never
// joined (or that just did).
func (t *topic) release(id string) {
	t.mu.Lock()
	t.releaseLocked(id)
	t.mu.Unlock()
}

func (t *topic) releaseLocked(id string) {
	if t.pending[id]--; t.pending[id] <= 0 {
		delete(t.pending, id)
	}
}

func (t *topic) setMember(id string, s *session) {
	t.rosterMu.Lock()
	_, had := t.members[id]
	if s == nil {
		delete(t.members, id)
	} else {
		t.members[id] = s
	}
	t.rosterMu.Unlock()
	switch {
	case had && s == nil:
		t.g.metrics.participants.Dec()
	case !had && s != nil:
		t.g.metrics.participants.Inc()
	}
}

// limiter returns participant id's token bucket, shared by all its
// connections, so that reconnecting never resets it.
func (t *topic) limiter(id string) *rate.Limiter {
	if t.g.opts.RatePerSecond < 0 {
		return nil
	}
	l, ok := t.limiters[id]
	if !ok {
		l = rate.NewLimiter(rate.Limit(t.g.opts.RatePerSecond), t.g.opts.RateBurst)
		t.limiters[id] = l
	}
	return l
}

// join makes s the participant's connection, replacing an older one, and
// sends the welcome and presence. Spec order: the welcome first, then the
// join to everyone else. Reference order: the join to everyone, the joiner
// included, then the welcome.
func (t *topic) join(ctx context.Context, s *session) error {
	if t.g.cluster != nil {
		return t.joinCluster(ctx, s)
	}
	welcome, err := t.joinLocked(ctx, s)
	if err != nil || welcome == nil {
		return err
	}
	return welcome()
}

// joinLocked does join's work under mu. The reference welcome carries a
// history tail, and reading history waits for the commit queue: it is
// returned for join to build after mu is released, in a slot of the
// joiner's order that holds back whatever comes after it.
func (t *topic) joinLocked(ctx context.Context, s *session) (welcome func() error, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := s.p.ID
	t.releaseLocked(id)
	s.limiter = t.limiter(id)
	if old := t.members[id]; old != nil {
		// The old connection goes first, with a leave, so that every
		// roster built from presence ends with exactly one entry for id.
		t.setMember(id, nil)
		old.close(closeNormal, "Duplicate connection - disconnecting old session", mcpx.LeaveReplaced)
		t.publishPresence(ctx, mcpx.PresenceLeave, old.p, mcpx.LeaveReplaced, "")
		t.g.log.Info("participant reconnected; old connection replaced", "topic", t.name, "participant", id)
	}
	if t.g.opts.Compat == CompatReference {
		var latest uint64
		if h := t.g.opts.History; h != nil {
			if latest, err = h.LatestSeq(t.name); err != nil {
				return nil, fmt.Errorf("history: %w", err)
			}
		}
		t.setMember(id, s)
		t.publishPresence(ctx, mcpx.PresenceJoin, s.p, "", "")
		// Envelopes up to latest are in the tail, later ones arrive live,
		// behind the welcome.
		place := s.hold()
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
	w, err := t.specWelcome(s)
	if err != nil {
		return nil, err
	}
	// Membership before the welcome, so that a client that reads its
	// welcome finds itself in the participants endpoint. The welcome is
	// still the first frame queued: nothing reaches s without mu.
	t.setMember(id, s)
	s.send(w)
	t.publishPresence(ctx, mcpx.PresenceJoin, s.p, "", id)
	return nil, nil
}

// leave removes s if it is still the participant's connection and tells the
// others. Safe to call more than once.
func (t *topic) leave(ctx context.Context, s *session, why mcpx.LeaveReason) {
	if t.g.cluster != nil {
		t.leaveCluster(ctx, s, why)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.members[s.p.ID] != s {
		return
	}
	t.setMember(s.p.ID, nil)
	if l := t.limiters[s.p.ID]; l != nil && l.Tokens() >= float64(t.g.opts.RateBurst) {
		delete(t.limiters, s.p.ID) // a full bucket holds no state worth keeping
	}
	if why != mcpx.LeaveShutdown {
		t.publishPresence(ctx, mcpx.PresenceLeave, s.p, why, "")
	}
}

// heartbeat publishes that s answered a ping, if s is still current.
func (t *topic) heartbeat(ctx context.Context, s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.members[s.p.ID] == s {
		t.publishPresence(ctx, mcpx.PresenceHeartbeat, s.p, "", "")
	}
}

// publishPresence must be called with mu held.
func (t *topic) publishPresence(ctx context.Context, event string, p mcpx.Participant, why mcpx.LeaveReason, except string) {
	e := presenceEnvelope(t.g.opts.Now(), event, p, why)
	if err := t.g.broker.Publish(ctx, Delivery{Topic: t.name, Frame: e.AppendJSON(nil), Except: except}); err != nil {
		t.g.log.Error("presence not published", "topic", t.name, "event", event, "participant", p.ID, "err", err)
	}
}

// publish assigns e its sequence number, queues it for history and fans it
// out to the others at once. The sender's own copy (the echo of a
// broadcast, or a directed envelope addressed to itself) is its
// acknowledgement: it goes out only once history has committed the
// envelope, in the place the envelope has in the topic's order (see
// session.stored). It returns the recipients e names that are not in the
// topic.
func (t *topic) publish(ctx context.Context, s *session, e *mcpx.Envelope) (absent []string, err error) {
	h := t.g.opts.History
	if h != nil {
		if err := s.reserve(h); err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	unreserve := func() {
		if h != nil {
			h.Release()
			<-s.window
		}
	}
	if t.members[s.p.ID] != s {
		unreserve()
		return nil, errReplaced
	}
	now := t.g.opts.Now()
	if h != nil {
		if e.Seq, err = h.NextSeq(t.name); err != nil {
			unreserve()
			return nil, fmt.Errorf("sequence: %w", err)
		}
	}
	frame := e.AppendJSON(make([]byte, 0, len(e.Payload)+192+len(e.ID)+len(e.CorrelationID)))
	d := Delivery{Topic: t.name, Frame: frame, Except: e.From}
	own := e.Broadcast()
	if !e.Broadcast() && t.g.opts.Visibility != VisibilityTopic {
		d.To = e.To
		own = slices.Contains(e.To, e.From)
	}
	if h != nil {
		var echo *slot
		if own {
			echo = s.hold()
		}
		rec := history.Record{Seq: e.Seq, ID: e.ID, From: e.From, To: e.To, Received: now, Data: frame}
		err := h.Append(t.name, rec, func(err error) { s.stored(echo, frame, e.ID, err) })
		if err != nil {
			<-s.window // Append gave the queue's place back
			if echo != nil {
				s.fill(echo)
			}
			return nil, fmt.Errorf("history: %w", err)
		}
	}
	if err := t.g.broker.Publish(ctx, d); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if h == nil && own {
		s.send(frame) // nothing to wait for
	}
	for _, r := range e.To {
		if t.members[r] == nil {
			absent = append(absent, r)
		}
	}
	return absent, nil
}

// deliver queues d for its local recipients. The broker calls it; it never
// blocks.
func (t *topic) deliver(d Delivery) {
	t.rosterMu.RLock()
	defer t.rosterMu.RUnlock()
	n := 0
	if d.To == nil {
		for id, s := range t.members {
			if id != d.Except {
				s.send(d.Frame)
				n++
			}
		}
	} else {
	next:
		for i, id := range d.To {
			for _, prev := range d.To[:i] {
				if prev == id {
					continue next // named twice, delivered once
				}
			}
			if s := t.members[id]; s != nil && id != d.Except {
				s.send(d.Frame)
				n++
			}
		}
	}
	t.g.metrics.deliveries.Add(float64(n))
}

// roster returns the participants, sorted by id, leaving out except.
func (t *topic) roster(except string) []mcpx.Participant {
	t.rosterMu.RLock()
	defer t.rosterMu.RUnlock()
	out := make([]mcpx.Participant, 0, len(t.members))
	for id, s := range t.members {
		if id != except {
			out = append(out, s.p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (t *topic) specWelcome(s *session) ([]byte, error) {
	info := mcpx.HistoryInfo{Limit: t.g.opts.HistoryPageLimit}
	if h := t.g.hist; h != nil {
		latest, err := h.LatestSeq(t.name)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		info.Enabled, info.LatestSeq = true, latest
	} else {
		info.Limit = 0
	}
	p := mcpx.Welcome{
		Event:        "welcome",
		Participant:  s.p,
		Participants: t.roster(s.p.ID),
		History:      info,
		Protocol:     mcpx.Protocol,
	}
	return gatewayEnvelope(t.g.opts.Now(), mcpx.KindSystem, nil, "", p).AppendJSON(nil), nil
}

// referenceWelcome builds the reference welcome, whose history tail ends
// at seq latest. It reads history: never call it under mu.
func (t *topic) referenceWelcome(ctx context.Context, s *session, latest uint64) ([]byte, error) {
	p := mcpx.ReferenceWelcome{
		Type:          "welcome",
		ParticipantID: s.p.ID,
		Topic:         t.name,
		Participants:  t.roster(s.p.ID),
		History:       []json.RawMessage{},
	}
	if c := t.g.cluster; c != nil {
		p.Participants = c.participants(t.name, s.p.ID) // cluster-wide
	}
	if h := t.g.hist; h != nil && t.g.opts.WelcomeHistory > 0 {
		page, err := h.Query(ctx, t.name, history.Query{Limit: t.g.opts.WelcomeHistory, Before: history.AtSeq(latest + 1), Visible: t.g.visibleTo(s.p.ID)})
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		for i := len(page.Records) - 1; i >= 0; i-- { // oldest first, as the reference sends it
			p.History = append(p.History, page.Records[i].Data)
		}
	}
	return gatewayEnvelope(t.g.opts.Now(), mcpx.KindSystem, []string{s.p.ID}, "", p).AppendJSON(nil), nil
}

// visibleTo is the history filter of the visibility policy for reader.
func (g *Gateway) visibleTo(reader string) func(from string, to []string) bool {
	if g.opts.Visibility == VisibilityTopic {
		return nil
	}
	return func(from string, to []string) bool {
		if len(to) == 0 || from == reader {
			return true
		}
		for _, r := range to {
			if r == reader {
				return true
			}
		}
		return false
	}
}
