package room

import (
	"math"
	"slices"

	"github.com/cvmgo/cvm/mcpx"
)

// This file is a topic's envelopes: publish hands each to the backend's
// log, which orders and stores it and hands it to every node's follower
// (Deliver), which delivers it to that node's participants. The sender's
// own copy, its echo, is its acknowledgement: it goes out once the log
// stored the envelope and this node's follower reached it, in its place
// in the topic's order, and the answers to the connection's later
// envelopes wait behind it.

// echoWait is a participant's own envelope on its way through the log:
// its echo goes out once the log has stored it (acked) and this node's
// follower has reached it in the topic's order (delivered), whichever
// comes last. after are the answers to the
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
// them. But an echo the log stored waits for the follower alone, and the
// follower may need a link (to NATS): while the backend is down, frames
// do not wait behind such an echo (see LinkLost), or the connection would
// hear nothing, not even unavailable, until the backend is back. echoMu must be
// held.
func (t *topic) answerLocked(s *session, pub uint64, frames ...[]byte) {
	for i := len(s.echoQ) - 1; i >= 0; i-- {
		w := s.echoQ[i]
		if w.pub >= pub {
			continue
		}
		if w.acked && !t.g.backend.Up() {
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

// LinkLost implements Follower: the backend went down. The echoes the log
// stored wait for the follower, which reaches them once the backend is
// back: what waits behind them goes out now, and from now on, while it is
// down, nothing waits behind them (answerLocked). So a connection hears
// unavailable for its envelopes at once during an outage, ahead of the
// echoes of the envelopes stored just before it.
func (t *topic) LinkLost() {
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

// publish hands e to the backend's log, which gives it its seq, stores
// it and has every node's follower deliver it, in the log's order. It
// returns as soon as the envelope is queued, so the read loop goes on
// reading: a connection may have Options.MaxUncommitted envelopes and
// maxFlightBytes waiting for the log, and its read loop waits here beyond
// either (the backpressure, through TCP, on this publisher only), and
// for whatever the log makes it wait. The answer comes once the log
// stored the envelope, or failed to: the sender's copy (held, like any
// echo, until the follower reached it too), an unknown_recipient, or the
// error envelope (session.answer), in the order of the connection's
// envelopes (answerLocked).
func (t *topic) publish(s *session, e *mcpx.Envelope) {
	b := t.g.backend
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
	if !b.Up() {
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
	b.Append(s.ctx, t.name, &Append{
		Delivery: d, ID: e.ID, From: e.From, Recipients: e.To, Pub: pub,
		Encode: func(seq uint64) []byte {
			e.Seq = seq
			return e.AppendJSON(make([]byte, 0, size))
		},
		Placed: s.appending.Done,
		Done: func(_ uint64, err error) {
			var absent []string
			if err == nil {
				present := b.Members(t.name)
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
					// and the answer after it; once the backend is back
					// if it is down now, so then nothing waits for it
					// (answerLocked).
					w.after = append(answer, w.after...)
					if !b.Up() {
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

// Deliver implements Follower: it queues an entry of the topic's log for
// its local recipients, in log order.
func (t *topic) Deliver(e Entry) {
	t.rosterMu.RLock()
	defer t.rosterMu.RUnlock()
	t.delivered.Store(e.Seq)
	var w *echoWait
	if e.Node == t.g.node {
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
				// Delivered although its append reported a failure (an
				// acknowledgement lost, or not stored): not an echo.
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
