package roomnats

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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
	beforeDeliver func(room.Entry)
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

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
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
