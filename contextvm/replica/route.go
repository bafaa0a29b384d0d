package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/durable"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// msg is one message event this replica routes, with what it knows of it.
type msg struct {
	in       *contextvm.Inbound
	rerouted bool      // taken over from a lost replica
	heldAt   time.Time // when this replica first held it (hold.go); zero if never
	// orphan is the lost replica's record of it, if it had one: the
	// lost replica may have claimed it.
	orphan     *inflightRecord
	lostMember string
}

// Route takes one fresh message event, on the server's router goroutine.
func (g *Group) Route(ctx context.Context, m *contextvm.Inbound) { g.route(ctx, &msg{in: m}) }

// again routes o once more, unless it has gone stale meanwhile: a request
// held, or taken over from a lost replica.
func (g *Group) again(ctx context.Context, o *msg) {
	if err := o.in.Fresh(); err != nil {
		g.log.Info("dropping message", "id", o.in.ID().Hex(), "client", o.in.Client().Hex(), "err", err)
		return
	}
	g.route(ctx, o)
}

func (g *Group) route(ctx context.Context, o *msg) {
	if o.heldAt.IsZero() {
		g.routeHeld(ctx) // held requests go before those that came after them
	}
	in := o.in
	switch place, owner := g.place(ctx, in.Client()); place {
	case placeOther:
		g.skip(o, owner)
		return
	case placeDown:
		g.holdMsg(o, "not ready: its NATS link is down or just back, or requests that came before are held")
		return
	}
	// A call is recorded as in flight on this replica before it is
	// claimed, so that if this replica dies from then on, a survivor
	// answers it (or, when the claim never landed, runs it).
	tracked := false
	if rec, ok := callIDs(in.Content()); ok {
		if err := g.begin(ctx, in.ID(), in.Client(), rec, in.Wrap()); err != nil {
			g.pause()
			g.holdMsg(o, fmt.Sprintf("recording it in flight: %v", err))
			return
		}
		tracked = true
	}
	start := time.Now()
	err := in.Claim(ctx)
	g.stats.timed(start)
	if err != nil && tracked {
		g.end(ctx, in.ID())
	}
	switch {
	case err == nil:
		g.stats.ClaimsWon.Add(1)
		if tracked && g.heldTooLong(o) {
			// Claimed, so no replica runs its calls now: saying so
			// is true. (Notifications and responses, which no caller
			// waits on, go through.)
			g.stats.Refused.Add(1)
			g.log.Info("refusing a held message: held too long to run; the claim is this replica's, so no replica runs it",
				"id", in.ID().Hex(), "client", in.Client().Hex(), "held", time.Since(o.heldAt))
			in.Refuse(contextvm.ReplicaUnavailableError(g.timeout))
			return
		}
	case errors.Is(err, contextvm.ErrReplay):
		g.stats.ClaimsLost.Add(1)
		switch {
		case o.orphan != nil:
			// A lost replica claimed it and never answered.
			g.answerOrphan(ctx, in.ID(), *o.orphan, o.lostMember)
			return
		case !o.heldAt.IsZero():
			g.log.Info("dropping a held message: another replica claimed it, and answers it", "id", in.ID().Hex(), "client", in.Client().Hex())
			return
		case o.rerouted:
			// Claimed by the lost replica, which answered it: no
			// stored answer goes out a second time.
			g.log.Debug("dropping message", "id", in.ID().Hex(), "client", in.Client().Hex(), "err", err)
			return
		}
	case !errors.Is(err, durable.ErrFull):
		// The claim may or may not have landed: held, it is claimed
		// again later and runs at most once. (Had this one landed
		// with its ack and check both lost, the next finds it and
		// takes it for another replica's: then nobody answers, and
		// the client's timeout does.)
		g.pause()
		g.holdMsg(o, fmt.Sprintf("claiming it: %v", err))
		return
	}
	in.Proceed(ctx, err)
}

// Assembled records the calls of a message reassembled from CEP-22
// fragments as in flight, answered under the end frame's id, so that a
// survivor answers them if this replica dies (the end frame itself
// carries no call), and proceeds with it.
func (g *Group) Assembled(ctx context.Context, m *contextvm.Inbound) {
	if rec, ok := callIDs(m.Content()); ok {
		if err := g.begin(ctx, m.ID(), m.Client(), rec, m.Wrap()); err != nil {
			// True: this replica holds the end frame's claim, so no
			// other can run the request.
			g.stats.Refused.Add(1)
			g.log.Warn("refusing a message: the replica group could not record it", "id", m.ID().Hex(), "err", err)
			m.Refuse(contextvm.ReplicaUnavailableError(g.timeout))
			return
		}
	}
	m.Proceed(ctx, nil)
}

// MissingStart is why the end of a transfer came without its start: the
// start went to another replica.
func (g *Group) MissingStart() string {
	return "the replica that received the start of this request is gone; the request did not run: send it again"
}

// Timeout is the group's membership timeout.
func (g *Group) Timeout() time.Duration { return g.timeout }

// Answered forgets the in-flight record of an answered message event. A
// refusal while this replica cannot coordinate leaves it: its removal
// would wait on a store that is failing, and a survivor's second answer
// to a refused call is ignored.
func (g *Group) Answered(ctx context.Context, id nostr.ID, refusal bool) {
	if refusal && !g.ready() {
		return
	}
	g.end(ctx, id)
}

// Session starts, on this replica, the session of a client that has none
// here: rebuilt from the shared record when another replica held it,
// stateless otherwise; and records this replica as its owner.
func (g *Group) Session(ctx context.Context, client nostr.PubKey) (*contextvm.ServerConn, *jsonrpc.Error) {
	rec, ok, err := g.loadSession(ctx, client)
	if err != nil {
		// True: the request is claimed (dispatch comes after the claim),
		// so no other replica runs it.
		g.stats.Refused.Add(1)
		return nil, contextvm.ReplicaUnavailableError(g.timeout)
	}
	if !ok || len(rec.Params) == 0 {
		c, refusal := g.host.StartSession(client, nil, nil)
		if refusal == nil {
			g.save(ctx, client, sessionRecord{})
		}
		return c, refusal
	}
	g.log.Info("rebuilding a client's session taken over from another replica", "client", client.Hex(), "from", rec.Owner)
	c, refusal := g.host.StartSession(client, rec.Params, rec.Tags)
	if refusal != nil {
		return nil, refusal
	}
	g.stats.Rebuilt.Add(1)
	g.save(ctx, client, rec)
	return c, nil
}

// Initialized records that this replica owns client's session, begun with
// an initialize of params and the client's discovery tags.
func (g *Group) Initialized(ctx context.Context, client nostr.PubKey, params json.RawMessage, tags nostr.Tags) {
	g.save(ctx, client, sessionRecord{Params: params, Tags: tags})
}

func (g *Group) save(ctx context.Context, client nostr.PubKey, rec sessionRecord) {
	if err := g.saveSession(ctx, client, rec); err != nil {
		g.log.Warn("could not record a session in the replica group: another replica cannot rebuild it", "client", client.Hex(), "err", err)
	}
}

// answerOrphan answers, with CodeReplicaLost, a call (or the calls of a
// batch) the lost replica member claimed and never answered. A batch is
// answered as a batch: one event with an error for each of its calls.
func (g *Group) answerOrphan(ctx context.Context, id nostr.ID, rec inflightRecord, member string) {
	client, err := nostr.PubKeyFromHex(rec.Client)
	if err != nil {
		return
	}
	if !rec.batch() {
		// A priced call: its payment state says what became of it.
		if resume, ok := g.host.Adopt(ctx, id, client, rec.Wrap); ok {
			if resume != nil {
				if calls, ok := callIDs(resume.Content); ok {
					if err := g.begin(ctx, id, client, calls, rec.Wrap); err != nil {
						g.log.Warn("could not record a call taken over from a lost replica", "request", id.Hex(), "err", err)
					}
				}
				g.host.Dispatch(ctx, *resume, rec.Wrap)
			}
			return
		}
	}
	lost := &jsonrpc.Error{Code: contextvm.CodeReplicaLost,
		Message: fmt.Sprintf("the replica running this call (%s) stopped before answering; it may or may not have taken effect, and will not run again; retry if it is safe to", member)}
	raws := rec.IDs
	if !rec.batch() {
		raws = []json.RawMessage{rec.ID}
	}
	ids := make([]jsonrpc.ID, 0, len(raws))
	for _, raw := range raws {
		var rid any
		if json.Unmarshal(raw, &rid) != nil {
			return
		}
		jid, err := jsonrpc.MakeID(rid)
		if err != nil {
			return
		}
		ids = append(ids, jid)
	}
	g.stats.Orphans.Add(1)
	requestIDs := string(rec.ID)
	if rec.batch() {
		b, _ := json.Marshal(rec.IDs)
		requestIDs = string(b)
	}
	g.log.Info("answering a lost replica's call in flight", "member", member, "client", client.Hex(), "id", id.Hex(), "requestId", requestIDs, "batch", rec.batch())
	g.host.AnswerCalls(ctx, id, client, rec.Wrap, ids, rec.batch(), lost)
}

// callIDs are the JSON-RPC ids of the calls a message event carries, as
// an in-flight record holds them: ID for one call, IDs for a batch with at
// least one call; false for notifications, responses or bad content.
func callIDs(content string) (inflightRecord, bool) {
	msgs, isBatch, err := contextvm.DecodeContent(content)
	if err != nil {
		return inflightRecord{}, false
	}
	var ids []json.RawMessage
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			continue
		}
		id, err := json.Marshal(req.ID.Raw())
		if err != nil {
			return inflightRecord{}, false
		}
		ids = append(ids, id)
	}
	switch {
	case len(ids) == 0:
		return inflightRecord{}, false
	case !isBatch:
		return inflightRecord{ID: ids[0]}, true
	}
	return inflightRecord{IDs: ids}, true
}

// lost takes over from a replica of the group that died: its calls in
// flight, for clients now this replica's, are answered CodeReplicaLost
// (they may have run there, and are not run again); the requests it never
// claimed go through the router again, to be claimed and run here.
func (g *Group) lost(ctx context.Context, member string) {
	orphans := g.orphans(ctx, member)
	os := g.takeSkipped(member)
	for _, o := range os {
		o.rerouted = true
		// A call this replica still has goes through the router again:
		// claimed there if the lost replica never claimed it, answered
		// as lost if it did.
		if rec, ok := orphans[o.in.ID()]; ok {
			o.orphan, o.lostMember = &rec, member
			delete(orphans, o.in.ID())
		}
	}
	for id, rec := range orphans {
		g.answerOrphan(ctx, id, rec, member)
	}
	if len(os) == 0 {
		return
	}
	g.stats.Rerouted.Add(int64(len(os)))
	g.log.Info("taking over a lost replica's unclaimed requests", "member", member, "requests", len(os))
	g.host.OnRouter(ctx, func(ctx context.Context) {
		for _, o := range os {
			g.again(ctx, o)
		}
	})
}
