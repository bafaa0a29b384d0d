package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/durable/natskv"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/nats-io/nats.go"
)

// Options make a Group (see docs/replicas.md).
type Options struct {
	// Conn is the NATS connection (JetStream enabled). Required; the
	// caller keeps ownership and closes it after the server.
	Conn *natsx.Conn
	// Member names this replica in the group (default random).
	Member string
	// Timeout is the membership timeout: a replica unheard this long is
	// taken for dead, its clients move to the others, and its calls in
	// flight are answered with CodeReplicaLost (default 3 s). Replicas
	// say they live every Timeout/6 (at most every second).
	Timeout time.Duration
	// StoreReplicas is the replication of the shared bucket (default 1; 3
	// on a 3-server NATS cluster).
	StoreReplicas int
}

// Spaces of the group's shared store, beside the server's own.
const (
	sessionSpace  = "contextvm.sessions" // client key -> sessionRecord
	inflightSpace = "contextvm.inflight" // + "." + member: event id -> inflightRecord
	inflightTTL   = time.Hour            // a call longer than this loses its record
	defaultTTL    = 3 * time.Second      // membership timeout
	skippedMax    = 4096                 // requests remembered for a failover
	sessionTTL    = 7 * 24 * time.Hour   // how long a session can be rebuilt
	settleBeats   = 2                    // heartbeats heard before a rejoined replica serves
	groupSubject  = "cvm.replicas.%s.hb" // per server key
	bucketPrefix  = "cvm-replicas-"      // + server key hex
	leaderSpace   = "contextvm.leader"   // key "announcer": the replica that announces
	removalQueue  = 1024                 // answered calls whose records wait for removal
)

// sessionRecord is what a replica needs to rebuild a client's session:
// who owns it, and the client's initialize params and discovery tags.
type sessionRecord struct {
	Owner  string          `json:"owner"`
	Params json.RawMessage `json:"params,omitempty"`
	Tags   nostr.Tags      `json:"tags,omitempty"`
}

// inflightRecord is a message event with calls a replica runs, kept until
// answered so that a survivor answers it if the replica dies: one call
// (ID), or a JSON-RPC batch (IDs: the ids of its calls, in order; its
// notifications need no answer).
type inflightRecord struct {
	Client string            `json:"client"`
	ID     json.RawMessage   `json:"id,omitempty"`
	IDs    []json.RawMessage `json:"ids,omitempty"`
	Wrap   nostr.Kind        `json:"wrap"`
}

// batch reports whether the record is of a batch.
func (r inflightRecord) batch() bool { return r.IDs != nil }

// heartbeat is what a replica publishes every beat.
type heartbeat struct {
	Member   string `json:"member"`
	Sessions int    `json:"sessions"`
	// Leaving is the last heartbeat of a replica that stops: the others
	// take its clients at once instead of after the timeout.
	Leaving bool `json:"leaving,omitempty"`
}

type memberView struct {
	seen     time.Time
	sessions int
}

// placement is where a request belongs.
type placement int

const (
	placeMine  placement = iota // this replica runs it
	placeOther                  // another replica does
	placeDown                   // this replica would, but cannot coordinate now: it holds it (hold.go)
)

// A Group makes a contextvm.Server one replica of a group serving the
// same key through NATS JetStream: give it as ServerOptions.Replicas, to
// one server only. Every replica sees every request; the one that owns the
// client's session claims it in the shared store and runs it, the others
// pass. Safe for concurrent use; its goroutines are the server's.
type Group struct {
	opts    Options
	host    *contextvm.Host
	conn    *natsx.Conn
	store   *natskv.Store
	member  string
	subject string
	timeout time.Duration
	beat    time.Duration
	log     *slog.Logger
	onLost  func(member string)

	mu       sync.Mutex
	members  map[string]memberView // others, by name
	live     []string              // sorted, self included
	epoch    uint64                // bumped whenever live changes, and when the link comes back
	owners   map[nostr.PubKey]ownerEntry
	upSince  time.Time // when the link last came up; zero while down
	sessions func() int
	leading  bool          // this replica holds the announcer lease
	leadCh   chan struct{} // closed and replaced when leading changes
	// pauseUntil is when, after the shared store failed, this replica
	// tries to coordinate again; held are the requests it owns but could
	// not coordinate, oldest first (hold.go).
	pauseUntil time.Time
	held       []*msg

	skipMu  sync.Mutex
	skipped []skippedItem

	// forget queues the records of answered calls for removal by the
	// remover, off the answering goroutine. syncRemoval (tests and
	// benchmarks) removes them on the answering goroutine instead.
	forget      chan nostr.ID
	syncRemoval atomic.Bool

	// wake tells the router that held requests can be routed again.
	wake chan struct{}

	stats groupStats
}

type ownerEntry struct {
	epoch uint64
	owner string
}

type skippedItem struct {
	o     *msg
	owner string
	at    time.Time
}

// groupStats are counters of the group's work, for /metrics.
type groupStats struct {
	ClaimsWon      atomic.Int64 // requests this replica claimed and ran
	ClaimsLost     atomic.Int64 // requests it tried to claim that another replica (or a replay) had
	Skipped        atomic.Int64 // requests that belonged to another replica
	Refused        atomic.Int64 // requests answered CodeReplicaUnavailable
	Held           atomic.Int64 // requests held while this replica could not coordinate them
	Orphans        atomic.Int64 // calls of dead replicas answered CodeReplicaLost
	Rerouted       atomic.Int64 // skipped requests taken over from a dead replica
	Rebuilt        atomic.Int64 // sessions rebuilt from the shared store
	MembersLost    atomic.Int64
	CoordinationN  atomic.Int64 // shared-store calls on the request path
	CoordinationNS atomic.Int64 // and the time they took, in nanoseconds
}

// timed adds the time since start to the coordination cost.
func (st *groupStats) timed(start time.Time) {
	st.CoordinationN.Add(1)
	st.CoordinationNS.Add(int64(time.Since(start)))
}

// New makes a group of o, to join as a server's Replicas. It connects
// nothing: the server joins when it starts (NewServer), and fails to
// start when it cannot.
func New(o Options) *Group {
	if o.Timeout <= 0 {
		o.Timeout = defaultTTL
	}
	if o.Member == "" {
		var b [6]byte
		rand.Read(b[:])
		o.Member = hex.EncodeToString(b[:])
	}
	return &Group{opts: o, member: o.Member, timeout: o.Timeout, beat: min(o.Timeout/6, time.Second)}
}

// Join opens the group's bucket for the server of h, and starts its
// membership (heard and said on NATS), the removal of answered calls'
// records, and the takeover of lost members. The bucket is the server's
// State unless it has one of its own.
func (g *Group) Join(ctx context.Context, h *contextvm.Host) (durable.Store, error) {
	if err := g.join(ctx, h.PublicKey(), h.Logger()); err != nil {
		return nil, err
	}
	g.host = h
	g.sessions = h.Sessions
	g.onLost = func(member string) { h.Go(func(ctx context.Context) { g.lost(ctx, member) }) }
	h.Intake(g.run)
	h.Intake(g.waker)
	h.Go(g.remover)
	return g.store, nil
}

// Store opens the group's bucket of the server key me, the one Join opens
// for the server: for what the server's owner keeps in the group's store
// before the server starts (cvm gateway's payment channels). The store
// needs no closing beyond the group's NATS connection.
func (g *Group) Store(ctx context.Context, me nostr.PubKey) (*natskv.Store, error) {
	if g.opts.Conn == nil {
		return nil, errors.New("replica: Options.Conn is required")
	}
	return natskv.Open(ctx, g.opts.Conn.JS, bucketPrefix+me.Hex()[:32], natskv.Options{Replicas: g.opts.StoreReplicas})
}

// join opens the bucket of the server key me.
func (g *Group) join(ctx context.Context, me nostr.PubKey, log *slog.Logger) error {
	o := g.opts
	if o.Conn == nil {
		return errors.New("replica: Options.Conn is required")
	}
	if g.store != nil {
		return errors.New("replica: a Group serves one server")
	}
	store, err := g.Store(ctx, me)
	if err != nil {
		return err
	}
	g.conn, g.store, g.subject, g.log = o.Conn, store, fmt.Sprintf(groupSubject, me.Hex()), log.With("replica", o.Member)
	g.members, g.owners = map[string]memberView{}, map[nostr.PubKey]ownerEntry{}
	g.sessions = func() int { return 0 }
	g.leadCh = make(chan struct{})
	g.forget = make(chan nostr.ID, removalQueue)
	g.wake = make(chan struct{}, 1)
	g.live = []string{g.member}
	if o.Conn.Up() {
		g.upSince = time.Now()
	}
	return nil
}

// run keeps the membership: it says this replica lives every beat, hears
// the others, and reports the ones unheard for the timeout, until ctx ends.
func (g *Group) run(ctx context.Context) {
	sub, err := g.conn.NC.Subscribe(g.subject, func(m *nats.Msg) {
		var hb heartbeat
		if json.Unmarshal(m.Data, &hb) != nil || hb.Member == "" || hb.Member == g.member {
			return
		}
		g.heard(hb)
	})
	if err != nil {
		g.log.Error("replica group: cannot subscribe", "err", err)
		return
	}
	defer sub.Unsubscribe()
	defer func() {
		// A replica that stops is no announcer, even before its lease
		// runs out, and says it leaves.
		g.mu.Lock()
		g.leading = false
		held := len(g.held)
		g.mu.Unlock()
		if held > 0 {
			g.log.Warn("stopping with requests held: none runs here; another replica runs them if it takes the clients over in time, else their clients' timeouts answer them", "held", held)
		}
		if g.conn.Up() {
			b, _ := json.Marshal(heartbeat{Member: g.member, Leaving: true})
			g.conn.NC.Publish(g.subject, b)
			g.conn.NC.Flush()
		}
	}()
	t := time.NewTicker(g.beat)
	defer t.Stop()
	for {
		up, _, changed := g.conn.Status()
		g.linkChanged(up)
		if up {
			g.publish()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
			g.check(time.Now())
			g.campaign(ctx)
			g.wakeHeld()
		}
	}
}

// campaign takes or renews the announcer lease (for the membership
// timeout), or finds it held by another replica. A replica that cannot
// reach NATS stops leading at its next beat; its lease then runs out and
// another replica takes it, within about the membership timeout.
func (g *Group) campaign(ctx context.Context) {
	held := false
	if g.ready() {
		lctx, cancel := context.WithTimeout(ctx, g.beat)
		var err error
		held, err = g.store.Lease(lctx, leaderSpace, []byte("announcer"), []byte(g.member), g.timeout)
		cancel()
		if err != nil {
			g.log.Debug("announcer lease", "err", err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if held != g.leading {
		g.leading = held
		close(g.leadCh)
		g.leadCh = make(chan struct{})
		g.log.Info("announcer lease", "held", held)
	}
}

// leader reports whether this replica announces, and a channel closed at
// the next change.
func (g *Group) leader() (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leading, g.leadCh
}

// Lead runs f with a context that ends when this replica stops being the
// group's announcer, each time it becomes it, until ctx ends.
func (g *Group) Lead(ctx context.Context, f func(context.Context)) {
	for {
		leading, changed := g.leader()
		if !leading {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		lctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-changed:
			case <-lctx.Done():
			}
			cancel()
		})
		f(lctx)
		cancel()
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
	}
}

func (g *Group) publish() {
	b, _ := json.Marshal(heartbeat{Member: g.member, Sessions: g.sessions()})
	g.conn.NC.Publish(g.subject, b)
}

func (g *Group) heard(hb heartbeat) {
	if hb.Leaving {
		g.mu.Lock()
		_, known := g.members[hb.Member]
		delete(g.members, hb.Member)
		if known {
			g.relive()
		}
		live := len(g.live)
		g.mu.Unlock()
		if known {
			g.log.Info("replica left: its clients move", "member", hb.Member, "live", live)
			if g.onLost != nil {
				g.onLost(hb.Member)
			}
		}
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, known := g.members[hb.Member]
	g.members[hb.Member] = memberView{seen: time.Now(), sessions: hb.Sessions}
	if !known {
		g.relive()
		g.log.Info("replica joined", "member", hb.Member, "live", len(g.live))
	}
}

// linkChanged follows the NATS link: while it is down the view is frozen
// (no member is declared dead by a replica that cannot hear anyone); when
// it comes back, every member gets a fresh timeout to be heard, and the
// owners it cached are read again: while it was cut off, the others may
// have taken its clients over (they took it for dead), and their session
// records now say so.
func (g *Group) linkChanged(up bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case up && g.upSince.IsZero():
		g.upSince = time.Now()
		g.epoch++
		for m, v := range g.members {
			v.seen = g.upSince
			g.members[m] = v
		}
	case !up && !g.upSince.IsZero():
		g.upSince = time.Time{}
	}
}

// check declares dead the members unheard for the timeout.
func (g *Group) check(now time.Time) {
	g.mu.Lock()
	if g.upSince.IsZero() {
		g.mu.Unlock()
		return
	}
	var lost []string
	for m, v := range g.members {
		if now.Sub(v.seen) > g.timeout {
			delete(g.members, m)
			lost = append(lost, m)
		}
	}
	if len(lost) > 0 {
		g.relive()
	}
	live := len(g.live)
	g.mu.Unlock()
	for _, m := range lost {
		g.stats.MembersLost.Add(1)
		g.log.Warn("replica lost: its clients move", "member", m, "live", live)
		if g.onLost != nil {
			g.onLost(m)
		}
	}
}

// relive recomputes the live list; g.mu held.
func (g *Group) relive() {
	live := []string{g.member}
	for m := range g.members {
		live = append(live, m)
	}
	slices.Sort(live)
	g.live = live
	g.epoch++
}

// ready reports whether the replica may take requests: the link is up and
// has been for long enough to hear the others, and the shared store has
// not just failed.
func (g *Group) ready() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readyLocked(time.Now())
}

// readyLocked is ready; g.mu held.
func (g *Group) readyLocked(now time.Time) bool {
	return !g.upSince.IsZero() && now.Sub(g.upSince) >= settleBeats*g.beat && !now.Before(g.pauseUntil)
}

// rendezvous picks the member with the highest hash of (member, client):
// every replica with the same live list picks the same one, and a change
// of the list moves only the clients of the members that came or went.
func rendezvous(live []string, client nostr.PubKey) string {
	var best string
	var top uint64
	for _, m := range live {
		h := fnv.New64a()
		h.Write([]byte(m))
		h.Write(client[:])
		if s := h.Sum64(); best == "" || s > top {
			best, top = m, s
		}
	}
	return best
}

// place says which replica runs client's requests: the owner in the shared
// session record while it lives, otherwise the rendezvous choice. The
// record is read once per client and membership change. While requests
// are held, a request this replica owns is held after them (placeDown),
// so that a client's requests run in the order they came.
func (g *Group) place(ctx context.Context, client nostr.PubKey) (placement, string) {
	g.mu.Lock()
	ready := g.readyLocked(time.Now()) && len(g.held) == 0
	epoch, live := g.epoch, g.live
	e, cached := g.owners[client]
	g.mu.Unlock()
	owner := e.owner
	if !cached || e.epoch != epoch {
		owner = rendezvous(live, client)
		if ready {
			start := time.Now()
			rec, ok, err := g.loadSession(ctx, client)
			g.stats.timed(start)
			if err != nil {
				ready = false
				g.pause()
			} else {
				if ok && slices.Contains(live, rec.Owner) {
					owner = rec.Owner
				}
				g.setOwner(client, epoch, owner)
			}
		}
	}
	switch {
	case owner != g.member:
		return placeOther, owner
	case !ready:
		return placeDown, owner
	}
	return placeMine, owner
}

func (g *Group) setOwner(client nostr.PubKey, epoch uint64, owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if epoch == g.epoch {
		if len(g.owners) > 100_000 {
			clear(g.owners)
		}
		g.owners[client] = ownerEntry{epoch: epoch, owner: owner}
	}
}

func (g *Group) loadSession(ctx context.Context, client nostr.PubKey) (sessionRecord, bool, error) {
	v, ok, err := g.store.Get(ctx, sessionSpace, client[:])
	if err != nil || !ok {
		return sessionRecord{}, false, err
	}
	var rec sessionRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return sessionRecord{}, false, nil
	}
	return rec, true, nil
}

// saveSession records that this replica owns client's session, with what
// rebuilding it needs.
func (g *Group) saveSession(ctx context.Context, client nostr.PubKey, rec sessionRecord) error {
	rec.Owner = g.member
	b, _ := json.Marshal(rec)
	defer g.stats.timed(time.Now())
	g.mu.Lock()
	g.owners[client] = ownerEntry{epoch: g.epoch, owner: g.member}
	g.mu.Unlock()
	return g.store.Put(ctx, sessionSpace, client[:], b, time.Now().Add(sessionTTL))
}

func (g *Group) inflightSpace(member string) string { return inflightSpace + "." + member }

// begin records the calls of a message event this replica is about to
// run; rec has their ids.
func (g *Group) begin(ctx context.Context, eventID nostr.ID, client nostr.PubKey, rec inflightRecord, wrap nostr.Kind) error {
	rec.Client, rec.Wrap = client.Hex(), wrap
	b, _ := json.Marshal(rec)
	defer g.stats.timed(time.Now())
	return g.store.Put(ctx, g.inflightSpace(g.member), eventID[:], b, time.Now().Add(inflightTTL))
}

// end forgets the record of an answered call. The answer is out, so the
// removal need not hold anything up: it is queued for the remover, and
// made here only when the queue is full (so that it stays bounded). Until
// it is made, a survivor of this replica's death would answer the call a
// second time, with CodeReplicaLost, which the client ignores; it never
// runs the call again (the claim stays).
func (g *Group) end(ctx context.Context, eventID nostr.ID) {
	if !g.syncRemoval.Load() {
		select {
		case g.forget <- eventID:
			return
		default:
		}
	}
	defer g.stats.timed(time.Now())
	g.remove(ctx, eventID)
}

func (g *Group) remove(ctx context.Context, eventID nostr.ID) {
	if err := g.store.Delete(ctx, g.inflightSpace(g.member), eventID[:]); err != nil {
		g.log.Debug("could not forget an answered call", "err", err)
	}
}

// remover removes the queued records of answered calls until ctx ends,
// then, for at most a second, the ones still queued: a replica that
// closes leaves as few records behind as it can. A removal taken from the
// queue is made whatever ctx does (within the membership timeout), so that
// none is lost to the race between the queue and ctx's end.
func (g *Group) remover(ctx context.Context) {
	bg := context.WithoutCancel(ctx)
	remove := func(ctx context.Context, id nostr.ID) {
		ctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		g.remove(ctx, id)
	}
	for {
		select {
		case id := <-g.forget:
			remove(bg, id)
		case <-ctx.Done():
			drain, cancel := context.WithTimeout(bg, time.Second)
			defer cancel()
			for {
				select {
				case id := <-g.forget:
					remove(drain, id)
				default:
					return
				}
			}
		}
	}
}

// orphans returns the calls member had in flight, whose clients now belong
// to this replica, and forgets them.
func (g *Group) orphans(ctx context.Context, member string) map[nostr.ID]inflightRecord {
	space := g.inflightSpace(member)
	keys, err := g.store.Keys(ctx, space)
	if err != nil {
		g.log.Warn("cannot list a lost replica's calls", "member", member, "err", err)
		return nil
	}
	out := map[nostr.ID]inflightRecord{}
	for _, k := range keys {
		v, ok, err := g.store.Get(ctx, space, k)
		if err != nil || !ok || len(k) != len(nostr.ID{}) {
			continue
		}
		var rec inflightRecord
		if json.Unmarshal(v, &rec) != nil || (len(rec.ID) == 0 && len(rec.IDs) == 0) {
			continue
		}
		client, err := nostr.PubKeyFromHex(rec.Client)
		if err != nil {
			continue
		}
		if p, _ := g.place(ctx, client); p == placeOther {
			continue
		}
		out[nostr.ID(k)] = rec
		g.store.Delete(ctx, space, k)
	}
	return out
}

// skip remembers a request that another replica owns, for the membership
// timeout: if that replica dies before running it, this one may take it.
func (g *Group) skip(o *msg, owner string) {
	g.stats.Skipped.Add(1)
	now := time.Now()
	g.skipMu.Lock()
	defer g.skipMu.Unlock()
	keep := g.skipped[:0]
	for _, s := range g.skipped {
		if now.Sub(s.at) < 2*g.timeout {
			keep = append(keep, s)
		}
	}
	g.skipped = keep
	if len(g.skipped) >= skippedMax {
		g.skipped = g.skipped[1:]
	}
	g.skipped = append(g.skipped, skippedItem{o: o, owner: owner, at: now})
}

// takeSkipped returns, oldest first, the remembered requests that member
// owned.
func (g *Group) takeSkipped(member string) []*msg {
	g.skipMu.Lock()
	defer g.skipMu.Unlock()
	var out []*msg
	keep := g.skipped[:0]
	for _, s := range g.skipped {
		if s.owner == member {
			out = append(out, s.o)
		} else {
			keep = append(keep, s)
		}
	}
	g.skipped = keep
	return out
}

// Status is a replica's view of its group, for /healthz and /metrics.
type Status struct {
	Member string `json:"member"`
	// Ready is false while the replica cannot coordinate (NATS down, or
	// just back): it then runs no request, and holds those it owns.
	Ready bool `json:"ready"`
	// Holding is how many requests it holds now.
	Holding int `json:"holding"`
	// Leader is true on the one replica that publishes the announcements.
	Leader bool `json:"leader"`
	// Members are the live replicas, this one included, with the sessions
	// each last reported.
	Members map[string]int `json:"members"`
	// Counters since start.
	ClaimsWon   int64 `json:"claims_won"`
	ClaimsLost  int64 `json:"claims_lost"`
	Skipped     int64 `json:"skipped"`
	Refused     int64 `json:"refused"`
	Held        int64 `json:"held"`
	Orphans     int64 `json:"orphans_answered"`
	Rerouted    int64 `json:"rerouted"`
	Rebuilt     int64 `json:"sessions_rebuilt"`
	MembersLost int64 `json:"members_lost"`
	// Coordinations are the shared-store calls made on the request path
	// (session lookups, in-flight records, claims), CoordinationNS the
	// time they took.
	Coordinations  int64 `json:"coordinations"`
	CoordinationNS int64 `json:"coordination_ns"`
}

// Status reports this replica's view of its group; the zero Status before
// it has joined.
func (g *Group) Status() Status {
	if g.store == nil {
		return Status{}
	}
	leading, _ := g.leader()
	st := Status{Member: g.member, Ready: g.ready(), Leader: leading, Members: map[string]int{g.member: g.sessions()}}
	g.mu.Lock()
	for m, v := range g.members {
		st.Members[m] = v.sessions
	}
	st.Holding = len(g.held)
	g.mu.Unlock()
	st.ClaimsWon, st.ClaimsLost = g.stats.ClaimsWon.Load(), g.stats.ClaimsLost.Load()
	st.Skipped, st.Refused, st.Held, st.Orphans = g.stats.Skipped.Load(), g.stats.Refused.Load(), g.stats.Held.Load(), g.stats.Orphans.Load()
	st.Rerouted, st.Rebuilt, st.MembersLost = g.stats.Rerouted.Load(), g.stats.Rebuilt.Load(), g.stats.MembersLost.Load()
	st.Coordinations, st.CoordinationNS = g.stats.CoordinationN.Load(), g.stats.CoordinationNS.Load()
	return st
}
