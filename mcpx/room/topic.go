package room

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"golang.org/x/time/rate"
)

// errReplaced: the connection is no longer its participant's.
var errReplaced = errors.New("connection replaced")

// topic is one room on this gateway node: its local connections, and the
// lock that puts its joins and leaves in one order. The backend's log
// orders its envelopes and its roster says who is in it, on every node.
//
// mu serializes joins, leaves and heartbeats. rosterMu guards members for
// delivery (Deliver, deliver), which runs in the backend's or the
// broker's goroutine, in order; members changes only with both held.
type topic struct {
	g           *Gateway
	name        string
	unsubscribe func()

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // per participant id; outlive connections

	rosterMu sync.RWMutex
	members  map[string]*session

	// delivered is the seq of the last log entry delivered; echoes are
	// the participants' own envelopes waiting for their echo, by append
	// number (publish.go).
	delivered atomic.Uint64
	echoMu    sync.Mutex
	echoes    map[uint64]*echoWait
}

func newTopic(g *Gateway, name string) *topic {
	return &topic{g: g, name: name, members: map[string]*session{}, limiters: map[string]*rate.Limiter{}, echoes: map[uint64]*echoWait{}}
}

// open starts following the topic's presence and log. g.mu is held.
func (t *topic) open() error {
	b := t.g.backend
	unsub, err := b.Subscribe(t.name, t.deliver)
	if err != nil {
		return fmt.Errorf("mcpx: subscribe %s: %w", t.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, stop, err := b.Follow(ctx, t.name, t)
	if err != nil {
		unsub()
		return fmt.Errorf("mcpx: follow %s: %w", t.name, err)
	}
	t.delivered.Store(last)
	t.unsubscribe = func() {
		stop()
		unsub()
	}
	return nil
}

func (t *topic) size() int {
	t.rosterMu.RLock()
	defer t.rosterMu.RUnlock()
	return len(t.members)
}

// admit claims participant p's place in the topic for connection conn,
// before the WebSocket upgrade, so that a full topic is refused with an
// HTTP status. It returns the entry it replaced (an older connection of
// p, on any node).
func (t *topic) admit(ctx context.Context, p mcpx.Participant, conn string) (*Member, error) {
	return t.g.backend.Claim(ctx, t.name, p, conn, t.g.opts.MaxParticipants)
}

// setMemberLocked changes the local connections; rosterMu must be held
// (and mu).
func (t *topic) setMemberLocked(id string, s *session) {
	_, had := t.members[id]
	if s == nil {
		delete(t.members, id)
	} else {
		t.members[id] = s
	}
	switch {
	case had && s == nil:
		t.g.metrics.participants.Dec()
	case !had && s != nil:
		t.g.metrics.participants.Inc()
	}
}

func (t *topic) setMember(id string, s *session) {
	t.rosterMu.Lock()
	t.setMemberLocked(id, s)
	t.rosterMu.Unlock()
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
	welcome, err := t.joinLocked(ctx, s)
	if err != nil || welcome == nil {
		return err
	}
	return welcome()
}

// joinLocked does join's work under mu. The reference welcome carries a
// history tail, and reading history waits for the log: it is returned
// for join to build after mu is released, in a slot of the joiner's
// order that holds back whatever comes after it.
func (t *topic) joinLocked(ctx context.Context, s *session) (welcome func() error, err error) {
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
		// every roster built from presence sees the leave before the
		// join; the new connection, which never saw the old one, is left
		// out.
		t.publishPresence(ctx, mcpx.PresenceLeave, s.replaced.P, mcpx.LeaveReplaced, id)
		t.g.log.Info("participant reconnected; old connection replaced", "topic", t.name, "participant", id, "old_node", s.replaced.Node)
	}
	// The roster before rosterMu: the backend may deliver presence, which
	// takes rosterMu, while it holds its own locks.
	others := participants(t.g.backend.Members(t.name), id)
	if t.g.opts.Compat == CompatReference {
		// The reference sends the joiner's join to everyone, the joiner
		// included, then the welcome. The joiner's copy is queued here,
		// first (presence between nodes would reach it after the welcome
		// and after live envelopes), and the same envelope goes to
		// everyone else through the broker.
		join := PresenceEnvelope(t.g.opts.Now(), mcpx.PresenceJoin, s.p, "").AppendJSON(nil)
		t.rosterMu.Lock()
		t.setMemberLocked(id, s)
		latest := t.delivered.Load() // the tail ends here; later envelopes arrive live
		s.send(join)
		place := s.hold()
		t.rosterMu.Unlock()
		if err := t.g.backend.Publish(ctx, Delivery{Topic: t.name, Frame: join, Except: id}); err != nil {
			t.g.log.Error("presence not published", "topic", t.name, "event", mcpx.PresenceJoin, "participant", id, "err", err)
		}
		return func() error {
			w, err := t.referenceWelcome(ctx, s, others, latest)
			if err != nil {
				s.fill(place)
				return err
			}
			s.fill(place, w)
			return nil
		}, nil
	}
	info := mcpx.HistoryInfo{}
	if t.g.hist != nil {
		info.Enabled, info.Limit = true, t.g.opts.HistoryPageLimit
	}
	// Under rosterMu, which delivery holds: the welcome's latest_seq is
	// exactly the last envelope the joiner will not receive live, and
	// the welcome is the first frame it gets.
	t.rosterMu.Lock()
	t.setMemberLocked(id, s)
	if info.Enabled {
		info.LatestSeq = t.delivered.Load()
	}
	w := mcpx.Welcome{
		Event:        "welcome",
		Participant:  s.p,
		Participants: others,
		History:      info,
		Protocol:     mcpx.Protocol,
	}
	s.send(gatewayEnvelope(t.g.opts.Now(), mcpx.KindSystem, nil, "", w).AppendJSON(nil))
	t.rosterMu.Unlock()
	t.publishPresence(ctx, mcpx.PresenceJoin, s.p, "", id)
	return nil, nil
}

// leave removes s if it is still the participant's connection; the
// backend removes its roster entry and tells the others. Safe to call
// more than once.
func (t *topic) leave(ctx context.Context, s *session, why mcpx.LeaveReason) {
	t.mu.Lock()
	if t.members[s.p.ID] != s {
		t.mu.Unlock()
		return
	}
	t.setMember(s.p.ID, nil)
	if l := t.limiters[s.p.ID]; l != nil && l.Tokens() >= float64(t.g.opts.RateBurst) {
		delete(t.limiters, s.p.ID) // a full bucket holds no state worth keeping
	}
	t.mu.Unlock()
	t.g.backend.Leave(ctx, t.name, s.p, s.connID, why)
}

// RosterChanged implements Follower: local connections that are no longer
// their participant's, because a newer one took over on another node or
// a node swept them out, are closed without a leave of their own (the
// node that changed the roster published it).
func (t *topic) RosterChanged(members map[string]Member) {
	t.mu.Lock()
	var gone []*session
	for id, s := range t.members {
		if m, ok := members[id]; !ok || m.Conn != s.connID {
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
	e := PresenceEnvelope(t.g.opts.Now(), event, p, why)
	if err := t.g.backend.Publish(ctx, Delivery{Topic: t.name, Frame: e.AppendJSON(nil), Except: except}); err != nil {
		t.g.log.Error("presence not published", "topic", t.name, "event", event, "participant", p.ID, "err", err)
	}
}

// deliver queues d, presence, for its local recipients. The broker calls
// it; it never blocks.
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

// referenceWelcome builds the reference welcome, whose history tail ends
// at seq latest. It reads history: never call it under mu.
func (t *topic) referenceWelcome(ctx context.Context, s *session, others []mcpx.Participant, latest uint64) ([]byte, error) {
	p := mcpx.ReferenceWelcome{
		Type:          "welcome",
		ParticipantID: s.p.ID,
		Topic:         t.name,
		Participants:  others,
		History:       []json.RawMessage{},
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
