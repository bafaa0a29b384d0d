package room

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnavailable is returned by Cluster operations while the link to NATS
// is down; the gateway answers with an unavailable error envelope.
var ErrUnavailable = errors.New("mcpx: NATS unavailable")

// NATS names. A topic becomes one subject token, base64url-encoded, since
// topics may contain dots.
const (
	clusterStream  = "MCPX"
	rosterBucket   = "mcpx-roster"
	logPrefix      = "mcpx.h."
	presencePrefix = "mcpx.p."
	nodeHeartbeat  = "mcpx.nodes.hb"

	hdrSeq    = "Mcpx-Seq"
	hdrID     = "Mcpx-Id"
	hdrFrom   = "Mcpx-From"
	hdrTo     = "Mcpx-To"
	hdrExcept = "Mcpx-Except"
	hdrNode   = "Mcpx-Node"
	hdrPub    = "Mcpx-Pub"
)

func topicToken(topic string) string { return base64.RawURLEncoding.EncodeToString([]byte(topic)) }

func logSubject(topic string) string { return logPrefix + topicToken(topic) }

func rosterKey(topic string) string { return "t." + topicToken(topic) }

// ClusterOptions configure NewCluster. Zero values select the defaults.
type ClusterOptions struct {
	// Node names this gateway node in the roster (default random).
	Node string
	// MaxPerTopic is how many envelopes each topic keeps (default 10000;
	// -1 keeps all): the stream's limit of messages per subject. A
	// message may hold a batch, so more may be stored; history serves the
	// newest MaxPerTopic.
	MaxPerTopic int
	// MaxAge is how long envelopes are kept (0 or less: for ever). A
	// stream-wide MaxAge would delete a quiet topic's newest message, the
	// one its next seq is read from; instead one node (the live node with
	// the smallest name) purges each topic's messages older than MaxAge
	// but its newest, every MaxAge/10 (between 100 ms and 1 min), and
	// history never serves an envelope older than MaxAge (so the newest,
	// kept for its seq, is not served either once it is too old).
	MaxAge time.Duration
	// Replicas of the stream and the roster bucket (default 1; 3 on a
	// 3-server NATS cluster).
	Replicas int
	// NodeTimeout is how long a node may go unheard before the others
	// report its participants as left (default 5 s). Nodes announce
	// themselves every NodeTimeout/5.
	NodeTimeout time.Duration
	// RetryAfter is what unavailable error envelopes advise (default 1 s).
	RetryAfter time.Duration
	// PresenceQueue bounds the presence messages (join, leave, heartbeat)
	// waiting to be written to NATS (default 4096): past it, presence is
	// shed, counted and logged, so that a node whose NATS link is slow
	// never blocks the topics that publish presence.
	PresenceQueue int
	// PresencePending bounds the presence messages NATS delivered to this
	// node that its topics have not handled yet, per topic (default 4096
	// messages, and 8 MiB): past it the client drops them, counted and
	// logged.
	PresencePending int
	Logger          *slog.Logger

	// publishPresence writes one presence message (default
	// NC.PublishMsg); tests stall it to fill the queue.
	publishPresence func(*nats.Msg) error
	// publishLog appends one message to the log (default
	// JetStream.PublishMsg); tests make it fail.
	publishLog func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	// rosterMax bounds a topic's roster value (default the connection's
	// largest payload less header room); tests make it small.
	rosterMax int
	// beforeDeliver sees each entry a follower is about to deliver
	// (default none); tests stall the follower in it.
	beforeDeliver func(entry)
}

// Cluster is what several gateway nodes share through NATS JetStream:
// each topic's history and order (one stream, a subject per topic, a
// message per envelope or per batch of them, seq in a header, guarded by
// Nats-Expected-Last-Subject-Sequence; one appender per topic and node
// groups what queues during an append into the next), its roster (a
// key-value bucket, one key per topic, changed by compare-and-set), and
// presence (core NATS, a subject per topic). Give it to Options.Cluster;
// see docs/mcpx.md, "Several nodes". Safe for concurrent use.
type Cluster struct {
	conn   *natsx.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	roster jetstream.KeyValue
	opts   ClusterOptions
	log    *slog.Logger
	node   string

	seqMu  sync.Mutex
	seqs   map[string]*topicSeq
	closed bool // by Close: no appender starts any more

	mu       sync.Mutex
	rosters  map[string]*rosterSnap // from the bucket's watcher and our own writes
	watchers map[string][]*topicWatch
	seen     map[string]time.Time // node -> last heartbeat
	upSince  time.Time
	retries  []pendingLeave // roster removals that failed while NATS was down
	orphans  []orphaned     // entries whose connection ended with its gateway

	stats clusterStats

	// presOut is the bounded queue of presence towards NATS, drained by
	// one goroutine; pubPresence writes one message (NC.PublishMsg; tests
	// replace it to stall the queue).
	presOut     chan *nats.Msg
	pubPresence func(*nats.Msg) error
	pubLog      func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	// presSubs are the topics' presence subscriptions, with the drops
	// already counted and logged; presDropped adds those of the
	// subscriptions that ended.
	presSubs    map[*nats.Subscription]int
	presDropped uint64
	shedLogged  uint64 // presence shed towards NATS, as of the last log line

	// ctx ends with Close; appenders run the topics' appends, each
	// while its topic has something queued.
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	appenders sync.WaitGroup

	// rosterQs are the roster changes waiting for each topic's writer
	// (see update); rosterWriters run them, each while its topic has
	// changes queued.
	rosterMu      sync.Mutex
	rosterQs      map[string]*rosterQueue
	rosterClosed  bool // by Close: no writer starts any more
	rosterWriters sync.WaitGroup
}

// member is one participant's entry in a topic's roster.
type member struct {
	Node string           `json:"node"`
	Conn string           `json:"conn"`
	P    mcpx.Participant `json:"p"`
}

type rosterSnap struct {
	rev     uint64
	members map[string]member
}

// NewCluster creates (or updates) the stream and the roster bucket and
// starts the node's heartbeat and the roster watcher. Close it after the
// gateways using it.
func NewCluster(ctx context.Context, conn *natsx.Conn, opts ClusterOptions) (*Cluster, error) {
	if opts.Node == "" {
		var b [6]byte
		rand.Read(b[:])
		opts.Node = hex.EncodeToString(b[:])
	}
	if opts.MaxPerTopic == 0 {
		opts.MaxPerTopic = 10000
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = 5 * time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.PresenceQueue <= 0 {
		opts.PresenceQueue = 4096
	}
	if opts.PresencePending <= 0 {
		opts.PresencePending = 4096
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Cluster{
		conn: conn, js: conn.JS, opts: opts, node: opts.Node,
		log:      opts.Logger.With("node", opts.Node),
		seqs:     map[string]*topicSeq{},
		rosters:  map[string]*rosterSnap{},
		rosterQs: map[string]*rosterQueue{},
		watchers: map[string][]*topicWatch{},
		seen:     map[string]time.Time{},
		upSince:  time.Now(),
		presOut:  make(chan *nats.Msg, opts.PresenceQueue),
		presSubs: map[*nats.Subscription]int{},
	}
	c.pubPresence = conn.NC.PublishMsg
	if opts.publishPresence != nil {
		c.pubPresence = opts.publishPresence
	}
	c.pubLog = c.js.PublishMsg
	if opts.publishLog != nil {
		c.pubLog = opts.publishLog
	}
	perSubject := int64(opts.MaxPerTopic)
	if perSubject < 0 {
		perSubject = -1
	}
	st, err := c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              clusterStream,
		Description:       "cvm MCPx rooms: every topic's envelopes, a subject per topic",
		Subjects:          []string{logPrefix + ">"},
		Storage:           jetstream.FileStorage,
		Replicas:          opts.Replicas,
		MaxMsgsPerSubject: perSubject,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
	})
	if err != nil {
		return nil, fmt.Errorf("mcpx cluster: stream %s: %w", clusterStream, err)
	}
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      rosterBucket,
		Description: "cvm MCPx rooms: each topic's participants",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("mcpx cluster: bucket %s: %w", rosterBucket, err)
	}
	c.stream, c.roster = st, kv
	// The watcher lives as long as the Cluster, not as long as ctx.
	bg, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(bg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mcpx cluster: watch %s: %w", rosterBucket, err)
	}
	hb, err := conn.NC.Subscribe(nodeHeartbeat, func(m *nats.Msg) {
		c.mu.Lock()
		c.seen[string(m.Data)] = time.Now()
		c.mu.Unlock()
	})
	if err != nil {
		w.Stop()
		cancel()
		return nil, fmt.Errorf("mcpx cluster: %w", err)
	}
	c.ctx, c.cancel = bg, cancel
	c.wg.Go(func() {
		defer w.Stop()
		c.watch(bg, w)
	})
	c.wg.Go(func() {
		defer hb.Unsubscribe()
		c.heartbeat(bg)
	})
	c.wg.Go(func() { c.drainPresence(bg) })
	c.wg.Go(func() { c.watchLink(bg) })
	if opts.MaxAge > 0 {
		c.wg.Go(func() { c.trimLoop(bg) })
	}
	return c, nil
}

// Close stops the node's heartbeat and watcher. It does not close the NATS
// connection.
func (c *Cluster) Close() {
	c.cancel()
	// Under the locks that start the writers, so that none starts after
	// the waits below.
	c.seqMu.Lock()
	c.closed = true
	c.seqMu.Unlock()
	c.rosterMu.Lock()
	c.rosterClosed = true
	c.rosterMu.Unlock()
	c.wg.Wait()
	c.appenders.Wait()
	c.rosterWriters.Wait()
}

// Node is this node's name.
func (c *Cluster) Node() string { return c.node }

// Up reports whether the link to NATS is up.
func (c *Cluster) Up() bool { return c.conn.Up() }

// watch applies every change of the roster bucket to the cache and tells
// the topics that follow it.
func (c *Cluster) watch(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the end of the initial values
			}
			topic, ok := topicFromKey(e.Key())
			if !ok {
				continue
			}
			snap := &rosterSnap{rev: e.Revision(), members: map[string]member{}}
			if e.Operation() == jetstream.KeyValuePut {
				if err := json.Unmarshal(e.Value(), &snap.members); err != nil {
					c.log.Error("unreadable roster entry", "topic", topic, "err", err)
					continue
				}
			}
			c.apply(topic, snap, true)
		}
	}
}

func topicFromKey(key string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(key, "t."))
	if err != nil || !strings.HasPrefix(key, "t.") {
		return "", false
	}
	return string(b), true
}

// apply makes snap the cached roster of topic if it is newer, and tells
// the topic's followers when it comes from the watcher (notify): this
// node's own writes need no telling.
func (c *Cluster) apply(topic string, snap *rosterSnap, notify bool) {
	c.mu.Lock()
	if old := c.rosters[topic]; old != nil && old.rev >= snap.rev {
		c.mu.Unlock()
		return
	}
	c.rosters[topic] = snap
	if !notify {
		c.mu.Unlock()
		return
	}
	ws := append([]*topicWatch{}, c.watchers[topic]...)
	c.mu.Unlock()
	for _, w := range ws {
		w.roster(snap)
	}
}

// watchLink calls the topics' linkLost each time the link to NATS goes
// down, until ctx ends.
func (c *Cluster) watchLink(ctx context.Context) {
	wasUp := true
	for {
		up, _, changed := c.conn.Status()
		if wasUp && !up {
			c.mu.Lock()
			var ws []*topicWatch
			for _, tw := range c.watchers {
				ws = append(ws, tw...)
			}
			c.mu.Unlock()
			for _, w := range ws {
				w.linkLost()
			}
		}
		wasUp = up
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// watchTopic tells a topic of this node what happens outside its log,
// until the returned function is called: roster gets every later roster
// of topic written by another node, linkLost runs each time the link to
// NATS goes down. Neither may block.
func (c *Cluster) watchTopic(topic string, roster func(*rosterSnap), linkLost func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &topicWatch{roster: roster, linkLost: linkLost}
	c.watchers[topic] = append(c.watchers[topic], w)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		ws := c.watchers[topic]
		for i, x := range ws {
			if x == w {
				c.watchers[topic] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(c.watchers[topic]) == 0 {
			delete(c.watchers, topic)
		}
	}
}

type topicWatch struct {
	roster   func(*rosterSnap)
	linkLost func()
}

// members returns topic's cached roster (never nil).
func (c *Cluster) members(topic string) map[string]member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.rosters[topic]; s != nil {
		return s.members
	}
	return map[string]member{}
}

// heartbeat announces the node and reports the participants of nodes not
// heard from in NodeTimeout as left.
func (c *Cluster) heartbeat(ctx context.Context) {
	tick := time.NewTicker(c.opts.NodeTimeout / 5)
	defer tick.Stop()
	wasUp := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c.logShed()
		up := c.conn.Up()
		if !up {
			wasUp = false
			continue
		}
		now := time.Now()
		if !wasUp {
			// Back from an outage: nobody was heard meanwhile, which
			// proves nothing about them.
			c.mu.Lock()
			c.upSince = now
			c.mu.Unlock()
			wasUp = true
		}
		if err := c.conn.NC.Publish(nodeHeartbeat, []byte(c.node)); err != nil {
			continue
		}
		c.retryLeaves(ctx)
		c.sweepOrphans(ctx, now)
		c.sweep(ctx, now)
	}
}

// sweep removes the roster entries of dead nodes and publishes their
// leaves; of several nodes sweeping, the one whose write wins publishes.
// A topic's dead entries go in one write, however many there are.
func (c *Cluster) sweep(ctx context.Context, now time.Time) {
	c.mu.Lock()
	if now.Sub(c.upSince) < c.opts.NodeTimeout {
		c.mu.Unlock()
		return
	}
	dead := map[string][]member{}
	for topic, s := range c.rosters {
		for _, m := range s.members {
			if m.Node == c.node {
				continue
			}
			if last, ok := c.seen[m.Node]; !ok || now.Sub(last) > c.opts.NodeTimeout {
				dead[topic] = append(dead[topic], m)
			}
		}
	}
	c.mu.Unlock()
	for topic, ms := range dead {
		var removed []member
		_, err := c.update(ctx, topic, func(roster map[string]member) (bool, error) {
			removed = removed[:0]
			for _, m := range ms {
				if cur, ok := roster[m.P.ID]; ok && cur.Conn == m.Conn {
					delete(roster, m.P.ID)
					removed = append(removed, m)
				}
			}
			return len(removed) > 0, nil
		})
		if err != nil {
			continue
		}
		for _, m := range removed {
			c.stats.deadLeaves.Add(1)
			c.log.Info("participant of a dead node reported left", "topic", topic, "participant", m.P.ID, "dead_node", m.Node)
			e := presenceEnvelope(time.Now(), mcpx.PresenceLeave, m.P, mcpx.LeaveTimeout)
			if err := c.Publish(ctx, Delivery{Topic: topic, Frame: e.AppendJSON(nil)}); err != nil {
				c.log.Warn("leave of a dead node's participant not published", "topic", topic, "err", err)
			}
		}
	}
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// claim makes conn participant p's connection in topic, cluster-wide: the
// newer connection wins. It fails with errTopicFull when the topic has max
// other participants. It returns the entry it replaced, if any, and the
// roster it wrote.
func (c *Cluster) claim(ctx context.Context, topic string, p mcpx.Participant, conn string, max int) (old *member, snap *rosterSnap, err error) {
	snap, err = c.update(ctx, topic, func(ms map[string]member) (bool, error) {
		old = nil
		if m, ok := ms[p.ID]; ok {
			old = &m
		} else if len(ms) >= max {
			return false, errTopicFull
		}
		ms[p.ID] = member{Node: c.node, Conn: conn, P: p}
		return true, nil
	})
	return old, snap, err
}

// release removes participant id from topic's roster if conn is still its
// connection, and reports whether it did.
func (c *Cluster) release(ctx context.Context, topic, id, conn string) (bool, error) {
	removed := false
	_, err := c.update(ctx, topic, func(ms map[string]member) (bool, error) {
		removed = false
		if m, ok := ms[id]; ok && m.Conn == conn {
			delete(ms, id)
			removed = true
		}
		return removed, nil
	})
	return removed, err
}

// Publish implements Broker for what is not stored: presence, on core NATS.
// It queues the message for the writer (drainPresence) and never blocks:
// when the queue is full the message is shed, counted
// (cvm_mcpx_cluster_presence_shed_total{direction="out"}) and logged.
// Presence is advisory (the roster is the bucket's), so a node whose link
// to NATS cannot keep up loses heartbeats and presence events rather than
// holding up the topics that publish them.
func (c *Cluster) Publish(_ context.Context, d Delivery) error {
	if !c.Up() {
		return ErrUnavailable
	}
	m := nats.NewMsg(presencePrefix + topicToken(d.Topic))
	m.Data = d.Frame
	if d.To != nil {
		m.Header.Set(hdrTo, strings.Join(d.To, ","))
	}
	if d.Except != "" {
		m.Header.Set(hdrExcept, d.Except)
	}
	select {
	case c.presOut <- m:
	default:
		c.stats.presenceShedOut.Add(1)
	}
	return nil
}

// drainPresence writes the queued presence to NATS, in order, until ctx
// ends; then it writes what is still queued (leaves published just before
// Close, say) and returns.
func (c *Cluster) drainPresence(ctx context.Context) {
	write := func(m *nats.Msg) {
		if err := c.pubPresence(m); err != nil {
			// NATS went down after the message was queued: nothing
			// buffers it (natsx never buffers while reconnecting).
			c.stats.presenceShedOut.Add(1)
		}
	}
	for {
		select {
		case m := <-c.presOut:
			write(m)
		case <-ctx.Done():
			for {
				select {
				case m := <-c.presOut:
					write(m)
				default:
					return
				}
			}
		}
	}
}

// Subscribe implements Broker for presence. The subscription's queue is
// bounded (PresencePending); what the client drops past it is counted
// (cvm_mcpx_cluster_presence_shed_total{direction="in"}) and logged.
func (c *Cluster) Subscribe(topic string, deliver func(Delivery)) (func(), error) {
	sub, err := c.conn.NC.Subscribe(presencePrefix+topicToken(topic), func(m *nats.Msg) {
		deliver(deliveryFromHeaders(topic, m.Header, m.Data))
	})
	if err != nil {
		return nil, fmt.Errorf("mcpx cluster: %w", err)
	}
	if err := sub.SetPendingLimits(c.opts.PresencePending, 8<<20); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("mcpx cluster: %w", err)
	}
	c.mu.Lock()
	c.presSubs[sub] = 0
	c.mu.Unlock()
	return func() {
		n, _ := sub.Dropped()
		sub.Unsubscribe()
		c.mu.Lock()
		c.presDropped += uint64(n)
		logged := c.presSubs[sub]
		delete(c.presSubs, sub)
		c.mu.Unlock()
		if n > logged {
			c.log.Warn("presence shed: this node did not keep up with NATS", "direction", "in", "topic", topic, "dropped", n-logged)
		}
	}, nil
}

// presenceShedIn counts the presence messages the client dropped because
// a topic did not take them in time (the subscriptions' pending limits).
func (c *Cluster) presenceShedIn() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.presDropped
	for sub := range c.presSubs {
		d, _ := sub.Dropped()
		n += uint64(d)
	}
	return n
}

// logShed writes one log line for the presence shed since the last one,
// in each direction (called every NodeTimeout/5).
func (c *Cluster) logShed() {
	if out := c.stats.presenceShedOut.Load(); out > c.shedLogged {
		c.log.Warn("presence shed: the queue towards NATS was full", "direction", "out", "dropped", out-c.shedLogged, "queue", c.opts.PresenceQueue)
		c.shedLogged = out
	}
	type drop struct {
		sub *nats.Subscription
		n   int
	}
	var drops []drop
	c.mu.Lock()
	for sub, logged := range c.presSubs {
		if d, _ := sub.Dropped(); d > logged {
			drops = append(drops, drop{sub, d - logged})
			c.presSubs[sub] = d
		}
	}
	c.mu.Unlock()
	for _, d := range drops {
		c.log.Warn("presence shed: this node did not keep up with NATS", "direction", "in", "subject", d.sub.Subject, "dropped", d.n, "pending_max", c.opts.PresencePending)
	}
}

func deliveryFromHeaders(topic string, h nats.Header, frame []byte) Delivery {
	d := Delivery{Topic: topic, Frame: frame, Except: h.Get(hdrExcept)}
	if to := h.Get(hdrTo); to != "" {
		d.To = strings.Split(to, ",")
	}
	return d
}

// entry is one stored envelope as every node's follower sees it.
type entry struct {
	Delivery
	Seq  uint64
	From string
	Node string // the node that appended it
	Pub  uint64 // that node's number for the append
}

// Bounds of one JetStream message of the log: at most maxBatch envelopes,
// and the connection's largest payload less batchHeaderRoom for the
// headers and batchSeqRoom per envelope (a batch encoded again after a
// conflict has larger seqs, a few bytes longer each).
const (
	maxBatch        = 256
	batchHeaderRoom = 4096
	batchSeqRoom    = 24
)

// appendReq is one envelope waiting for its topic's appender.
type appendReq struct {
	d        Delivery // To and Except; Frame is encode's
	id, from string
	pub      uint64
	// encode builds the frame for a seq; it may be called again, with
	// another seq, if another node took the first.
	encode func(seq uint64) []byte
	// done gets the envelope's seq once JetStream acknowledged the
	// message holding it, or why not. It runs on the appender and must
	// not block.
	done func(seq uint64, err error)
}

// topicSeq is this node's appender of a topic: what waits for the next
// append, and this node's view of the end of the topic's log.
type topicSeq struct {
	mu      sync.Mutex
	queue   []*appendReq
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
func (c *Cluster) enqueueAppend(topic string, r *appendReq) {
	c.seqMu.Lock()
	if c.closed {
		c.seqMu.Unlock()
		r.done(0, fmt.Errorf("%w: the node is closing", ErrUnavailable))
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
			r.done(first+uint64(i), err)
			batch[i] = nil // the queue's array outlives the batch
		}
	}
}

// appendBatch stores a prefix of batch (as many envelopes as fit in one
// message) under the topic's next seqs, in order, and returns the first
// seq and how many it stored, or why it failed (n is then how many
// failed). It returns once JetStream has acknowledged the message.
func (c *Cluster) appendBatch(ctx context.Context, topic string, ts *topicSeq, batch []*appendReq) (first uint64, n int, err error) {
	n = len(batch)
	if !c.Up() {
		return 0, n, ErrUnavailable
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
			m.Data = r.encode(first)
			m.Header.Set(hdrSeq, strconv.FormatUint(first, 10))
			m.Header.Set(hdrID, r.id)
			m.Header.Set(hdrFrom, r.from)
			if r.d.To != nil {
				m.Header.Set(hdrTo, strings.Join(r.d.To, ","))
			}
			if r.d.Except != "" {
				m.Header.Set(hdrExcept, r.d.Except)
			}
			m.Header.Set(hdrPub, strconv.FormatUint(r.pub, 10))
		} else {
			data = data[:0]
			for i, r := range batch {
				at := len(data)
				data = appendBatchRecord(data, batchRecord{ID: r.id, From: r.from, To: r.d.To, Except: r.d.Except, Pub: r.pub, Frame: r.encode(first + uint64(i))})
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
				return 0, n, fmt.Errorf("%w: %w", ErrUnavailable, err)
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
			return 0, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
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
func (c *Cluster) follow(ctx context.Context, topic string, deliver func(entry)) (last uint64, stop func(), err error) {
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
func entriesFromMsg(topic string, h nats.Header, data []byte) ([]entry, error) {
	first, count, err := msgSeqs(h)
	if err != nil {
		return nil, err
	}
	node := h.Get(hdrNode)
	if h.Get(hdrCount) == "" {
		pub, _ := strconv.ParseUint(h.Get(hdrPub), 10, 64)
		return []entry{{Delivery: deliveryFromHeaders(topic, h, data), Seq: first, From: h.Get(hdrFrom), Node: node, Pub: pub}}, nil
	}
	recs, err := decodeBatch(data, count)
	if err != nil {
		return nil, err
	}
	out := make([]entry, len(recs))
	for i, r := range recs {
		out[i] = entry{Delivery: Delivery{Topic: topic, Frame: r.Frame, To: r.To, Except: r.Except}, Seq: first + uint64(i), From: r.From, Node: node, Pub: r.Pub}
	}
	return out, nil
}

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

// unreachable reports whether err says that NATS could not be reached
// (down, reconnecting, or not answering in time), which the gateway
// answers with unavailable: the link can go down between the check of Up
// and a request, and the client reports that in several ways.
func (c *Cluster) unreachable(err error) bool {
	return !c.Up() || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected)
}

func (c *Cluster) readErr(err error) error {
	if c.unreachable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
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
