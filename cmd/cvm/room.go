package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/roomnats"
	"github.com/cvmgo/cvm/mcpx/roompage"
	"github.com/spf13/cobra"
)

func (a *app) roomCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "room",
		Short: "MCPx v0 rooms: run a gateway, mint tokens, bridge MCP servers in, chat",
		Long: `MCPx v0 rooms are topics on a WebSocket gateway in which every participant is
an MCP server and can call the others' tools. "cvm room serve" runs the
gateway; "cvm room token" mints a participant's bearer token with the
gateway's signing key (in the same --data directory, so it works while the
gateway runs); "cvm room bridge" makes a stdio MCP server a participant;
"cvm room chat" joins from the terminal. See docs/mcpx.md.`,
	}
	cmd.AddCommand(a.roomServeCommand(), a.roomTokenCommand(), a.roomBridgeCommand(), a.roomChatCommand())
	return cmd
}

// roomKeys loads the token signing keys of room serve and room token,
// created if missing, from their --data directory: data, else "room" in
// the data directory.
func roomKeys(a *app, data string) (dir string, keys *room.Keys, err error) {
	if dir, err = a.dataSubdir(data, "room"); err != nil {
		return "", nil, err
	}
	keys, err = room.LoadOrCreateKeys(dir)
	return dir, keys, err
}

// roomServeHelp is the long help of roomServe.
const roomServeHelp = `Run an MCPx v0 gateway: WebSocket rooms at /v0/ws?topic=NAME, the REST helpers
(/v0/topics, /v0/topics/{topic}/participants, /v0/topics/{topic}/history),
/healthz and /metrics, and a page for people at / (open the REST URL in a
browser: join with a topic and a token, chat, call participants' tools). History and the token signing keys live in --data.

With --nats URL the gateway is one node of several sharing that NATS server
(with JetStream: nats-server -js): history, seq, delivery, the roster and
presence live in NATS, and --data holds only the signing keys, which every
node needs (share the directory or copy it). Switching a gateway to --nats
starts a fresh history. A NATS server that cannot be reached at start is
an error (exit 2); one lost later makes the node answer new envelopes with
"unavailable" until it returns. See docs/mcpx.md, "Several nodes".

When the gateway is ready, one JSON line is printed on stdout:
  {"ready":true,"url":"ws://127.0.0.1:7070/v0/ws",...}
Logs go to stderr. SIGINT or SIGTERM closes every connection (1001) and
exits.`

// roomServeFlags are cvm room serve's flags.
type roomServeFlags struct {
	listen, data, compat, visibility string
	natsURL                          string
	natsReplicas                     int
	opts                             room.Options
	hist                             history.Options
}

// roomServeCmd is one run of cvm room serve: the invocation's app and the
// command's flags.
type roomServeCmd struct {
	*app
	sf roomServeFlags
}

func (a *app) roomServeCommand() *cobra.Command {
	var sf roomServeFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an MCPx v0 gateway",
		Long:  roomServeHelp,
		Args:  positional(0, 0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return (&roomServeCmd{app: a, sf: sf}).run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&sf.listen, "listen", "127.0.0.1:7070", "address to listen on (127.0.0.1:0 picks a free port)")
	f.StringVar(&sf.data, "data", "", "directory for history and signing keys (default: room in the data directory)")
	f.StringVar(&sf.compat, "compat", string(room.CompatSpec), "welcome and join order: spec, or reference (the reference gateway's shape)")
	f.StringVar(&sf.visibility, "visibility", string(room.VisibilityDirected), "who sees directed envelopes, live and in history: directed (recipients only) or topic (everyone)")
	f.StringSliceVar(&sf.opts.AllowedOrigins, "allow-origin", nil, "extra browser Origin hosts allowed to connect (patterns like *.example.com)")
	f.Int64Var(&sf.opts.MaxFrameBytes, "max-frame-bytes", 1<<20, "largest envelope accepted")
	f.IntVar(&sf.opts.MaxParticipants, "max-participants", 200, "participants per topic")
	f.IntVar(&sf.opts.SendQueueFrames, "send-queue-frames", 4096, "envelopes queued per connection before it is dropped as a slow consumer")
	f.IntVar(&sf.opts.SendQueueBytes, "send-queue-bytes", 8<<20, "bytes queued per connection before it is dropped as a slow consumer")
	f.Float64Var(&sf.opts.RatePerSecond, "rate", 50, "envelopes per second per participant (-1: unlimited)")
	f.IntVar(&sf.opts.RateBurst, "burst", 100, "burst of envelopes per participant")
	f.DurationVar(&sf.opts.HeartbeatInterval, "heartbeat", 30*time.Second, "ping and presence heartbeat interval (-1s: off)")
	f.DurationVar(&sf.opts.PongTimeout, "pong-timeout", 10*time.Second, "how long a pong may take before the peer is dropped")
	f.IntVar(&sf.hist.MaxPerTopic, "history-max", 10000, "envelopes kept per topic (-1: all)")
	f.DurationVar(&sf.hist.MaxAge, "history-max-age", 30*24*time.Hour, "how long envelopes are kept (-1s: forever; with --nats each topic's newest envelope is kept for its seq, but not served once older)")
	f.StringVar(&sf.natsURL, "nats", "", "NATS server URL (JetStream enabled): join the gateway nodes sharing it, e.g. nats://127.0.0.1:4222")
	f.IntVar(&sf.natsReplicas, "nats-replicas", 1, "with --nats: replicas of the stream and roster bucket (3 on a 3-server NATS cluster)")
	for _, name := range []string{"listen", "data", "compat", "visibility", "allow-origin", "max-frame-bytes",
		"max-participants", "send-queue-frames", "send-queue-bytes", "rate", "burst", "heartbeat", "pong-timeout",
		"history-max", "history-max-age", "nats", "nats-replicas"} {
		config.Bind(f, name, "room."+name)
	}
	return cmd
}

// run starts the gateway on its backend (NATS, else the history in
// --data) and serves until ctx ends.
func (r *roomServeCmd) run(ctx context.Context) error {
	opts, hist := r.sf.opts, r.sf.hist
	dir, keys, err := roomKeys(r.app, r.sf.data)
	if err != nil {
		return err
	}
	opts.Tokens, opts.Logger = keys, r.log
	if r.sf.natsURL != "" {
		conn, err := natsx.Connect(ctx, r.sf.natsURL, natsx.Options{Name: "cvm room serve", Logger: r.log})
		if err != nil {
			return fmt.Errorf("--nats: %w (is nats-server -js running there?)", err)
		}
		defer conn.Close()
		cl, err := roomnats.NewCluster(ctx, conn, roomnats.ClusterOptions{MaxPerTopic: hist.MaxPerTopic, MaxAge: hist.MaxAge, Replicas: r.sf.natsReplicas, Logger: r.log})
		if err != nil {
			return fmt.Errorf("--nats: %w", err)
		}
		defer cl.Close()
		opts.Backend = cl
	} else {
		hist.Logger = r.log
		store, err := history.Open(filepath.Join(dir, "history.db"), hist)
		if err != nil {
			return fmt.Errorf("%w (is another gateway using --data %s?)", err, dir)
		}
		defer store.Close()
		opts.History = store
	}
	opts.Compat, opts.Visibility = room.Compat(r.sf.compat), room.Visibility(r.sf.visibility)
	opts.Page = roompage.Handler(opts.AllowedOrigins)
	s, err := room.Start(r.sf.listen, opts)
	if err != nil {
		return err
	}
	return r.serve(ctx, s, opts.Backend, roomReadyLine{Ready: true, URL: s.WSURL, REST: s.URL, Metrics: s.URL + "/metrics",
		Data: dir, Compat: r.sf.compat, Visibility: r.sf.visibility, Page: s.URL + "/", NATS: r.sf.natsURL})
}

// roomReadyLine is the JSON line cvm room serve prints once it listens.
type roomReadyLine struct {
	Ready      bool   `json:"ready"`
	URL        string `json:"url"`
	REST       string `json:"rest"`
	Metrics    string `json:"metrics"`
	Data       string `json:"data"`
	Compat     string `json:"compat"`
	Visibility string `json:"visibility"`
	Page       string `json:"page"`
	NATS       string `json:"nats,omitempty"`
	Node       string `json:"node,omitempty"`
}

// serve prints the ready line (with the node's name, on a cluster backend)
// and serves until ctx ends or the gateway stops.
func (r *roomServeCmd) serve(ctx context.Context, s *room.Server, backend room.Backend, ready roomReadyLine) error {
	if backend != nil {
		ready.Node = backend.Node()
	}
	if err := r.printJSON(ready); err != nil {
		s.Close()
		return err
	}
	r.log.Info("room gateway listening", "url", s.WSURL, "data", ready.Data, "compat", ready.Compat, "visibility", ready.Visibility)
	select {
	case <-ctx.Done():
		r.log.Info("shutting down")
	case err := <-waitRoom(s):
		s.Close()
		return err
	}
	return s.Close()
}

func waitRoom(s *room.Server) <-chan error {
	c := make(chan error, 1)
	go func() { c <- s.Wait() }()
	return c
}

// roomTokenHelp is the long help of roomToken.
const roomTokenHelp = `Mint a signed token (a JWT) that admits participant --id to the --topic rooms
of the gateway whose --data directory holds the signing key (the key is
created there if missing). Only the token is printed; give it to the
participant, who sends it as "Authorization: Bearer TOKEN".`

// roomTokenFlags are cvm room token's flags.
type roomTokenFlags struct {
	data, id, name, kind, alg string
	topics                    []string
	ttl                       time.Duration
}

// roomTokenCmd is one run of cvm room token: the invocation's app and the
// command's flags.
type roomTokenCmd struct {
	*app
	tf roomTokenFlags
}

func (a *app) roomTokenCommand() *cobra.Command {
	var tf roomTokenFlags
	cmd := &cobra.Command{
		Use:   "token --topic T --id ID",
		Short: "Mint a participant's bearer token for a room",
		Long:  roomTokenHelp,
		Args:  positional(0, 0),
		RunE:  func(*cobra.Command, []string) error { return (&roomTokenCmd{app: a, tf: tf}).run() },
	}
	f := cmd.Flags()
	f.StringVar(&tf.data, "data", "", "the gateway's data directory (default: room in the data directory)")
	f.StringSliceVar(&tf.topics, "topic", nil, "topic the token admits to (repeat for several)")
	f.StringVar(&tf.id, "id", "", "participant id")
	f.StringVar(&tf.name, "name", "", "display name announced in presence (default: the id)")
	f.StringVar(&tf.kind, "kind", mcpx.ParticipantAgent, "participant kind: human, agent or robot")
	f.DurationVar(&tf.ttl, "ttl", 24*time.Hour, "how long the token is valid")
	f.StringVar(&tf.alg, "alg", room.AlgEdDSA, "signature algorithm: EdDSA or HS256")
	config.Bind(f, "data", "room.data")
	return cmd
}

// check checks the flags and returns the signature algorithm's canonical
// name.
func (tf roomTokenFlags) check() (alg string, err error) {
	if len(tf.topics) == 0 || tf.id == "" {
		return "", fmt.Errorf("--topic and --id are required, e.g. cvm room token --topic room:alpha --id robot-alpha")
	}
	for _, t := range tf.topics {
		if err := mcpx.ValidateTopic(t); err != nil {
			return "", fmt.Errorf("--topic: %w", err)
		}
	}
	if err := mcpx.ValidateParticipantID(tf.id); err != nil {
		return "", fmt.Errorf("--id: %w", err)
	}
	switch tf.kind {
	case mcpx.ParticipantHuman, mcpx.ParticipantAgent, mcpx.ParticipantRobot:
	default:
		return "", fmt.Errorf("--kind %q: want human, agent or robot", tf.kind)
	}
	if tf.ttl <= 0 {
		return "", fmt.Errorf("--ttl %v: must be positive, e.g. 24h", tf.ttl)
	}
	switch strings.ToUpper(tf.alg) {
	case strings.ToUpper(room.AlgEdDSA):
		return room.AlgEdDSA, nil
	case room.AlgHS256:
		return room.AlgHS256, nil
	default:
		return "", fmt.Errorf("--alg %q: want EdDSA or HS256", tf.alg)
	}
}

// run mints the token with the signing key in --data and prints it.
func (t *roomTokenCmd) run() error {
	alg, err := t.tf.check()
	if err != nil {
		return err
	}
	_, keys, err := roomKeys(t.app, t.tf.data)
	if err != nil {
		return err
	}
	now := time.Now()
	claims := room.Claims{
		Issuer:    "cvm-room",
		Subject:   t.tf.id,
		Audience:  t.tf.topics,
		IssuedAt:  now.Unix(),
		ExpiresAt: now.Add(t.tf.ttl).Unix(),
		Name:      t.tf.name,
		Kind:      t.tf.kind,
	}
	tok, err := keys.Sign(claims, alg)
	if err != nil {
		return err
	}
	if t.jsonOut {
		return t.printJSON(map[string]any{"token": tok, "participant": t.tf.id, "topics": t.tf.topics,
			"expires_at": time.Unix(claims.ExpiresAt, 0).UTC().Format(time.RFC3339)})
	}
	_, err = fmt.Fprintln(t.stdout, tok)
	return err
}
