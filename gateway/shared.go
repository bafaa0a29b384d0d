package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/mcpmux"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hub serves client sessions through one upstream session (every one in
// Shared mode, the stateless ones in PerClient mode), multiplexed by
// internal/mcpmux: ids, progress tokens, subscriptions, cancellations and
// the upstream's own requests are the mux's business; the hub connects
// client sessions to it and keeps the gateway's books (slots, idleness,
// metrics).
type hub struct {
	g   *Gateway
	mux *mcpmux.Mux
	log *slog.Logger
}

// outboxSize bounds the messages queued for one client. The upstream's
// reader waits when a client's queue is full; clients are written to
// through relays, so only a stalled relay connection fills one.
const outboxSize = 1024

// hubOptions say what a hub is for: Shared mode's hub serves every client,
// the stateless hub of PerClient mode only clients without a session.
type hubOptions struct {
	// name and hint go into the errors the mux gives (see mcpmux.Options).
	name, hint string
	// caps are what the hub declares to the upstream (nil: sampling and
	// elicitation, which it relays to a client when it can tell which one).
	caps *mcp.ClientCapabilities
	log  *slog.Logger
}

// sharedMode is the hub of Shared mode. Roots are per client and have no
// shared answer, so the mux offers none.
func sharedMode(g *Gateway) hubOptions {
	return hubOptions{
		name: "cvm gateway (shared session mode)",
		hint: "run the gateway with --session-mode per-client",
		log:  g.opts.Logger.With("mode", "shared"),
	}
}

// newHub starts the upstream.
func newHub(ctx context.Context, g *Gateway, o hubOptions) (*hub, error) {
	m := g.metrics
	mux, err := mcpmux.Open(ctx, mcpmux.Options{
		Upstream:          g.opts.Upstream,
		ClientInfo:        g.opts.ClientInfo,
		Capabilities:      o.caps,
		ProtocolVersion:   contextvm.ProtocolVersion,
		Routing:           mcpmux.RouteSole,
		Name:              o.name,
		Hint:              o.hint,
		InitializeTimeout: g.opts.InitializeTimeout,
		RestartMin:        g.opts.RestartMin,
		RestartMax:        g.opts.RestartMax,
		Events: mcpmux.Events{
			Answered:   func(method string, start time.Time, o mcpmux.Outcome) { m.answered(method, start, string(o)) },
			Unroutable: func(string, string) { m.refused.WithLabelValues("unroutable").Inc() },
			Link:       g.linkEvents(),
		},
		Logger: o.log,
	})
	if err != nil {
		return nil, err
	}
	return &hub{g: g, mux: mux, log: o.log}, nil
}

func (h *hub) close() { h.mux.Close() }

// member is one client session in Shared mode. What the mux sends it is
// queued and written by the member's own writer, so that a slow relay
// stalls one client, not the upstream's reader for long.
type member struct {
	conn clientConn
	sess *mcpmux.Session
	log  *slog.Logger
	out  chan jsonrpc.Message
	done chan struct{} // closed when the session ends: Send gives up
	// unsent counts the messages Send took that the writer has not
	// written: an answer on its way makes the session busy, as its request
	// did, so that it is not reaped between the two.
	unsent atomic.Int64

	mu   sync.Mutex
	last time.Time
}

func (m *member) idleSince() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

func (m *member) busy() bool { return m.sess.InFlight() > 0 || m.unsent.Load() > 0 }

func (m *member) end() { m.conn.Close() }

func (m *member) client() nostr.PubKey { return m.conn.Client() }

// Send implements mcpmux.Caller: it queues msg for the member's writer.
func (m *member) Send(msg jsonrpc.Message, _ jsonrpc.ID) error {
	m.unsent.Add(1)
	select {
	case m.out <- msg:
		return nil
	case <-m.done:
		m.unsent.Add(-1)
		return errSessionEnded
	}
}

var errSessionEnded = errors.New("the client session ended")

func (m *member) write(ctx context.Context) {
	for {
		select {
		case msg := <-m.out:
			if err := m.conn.Write(ctx, msg); err != nil {
				m.log.Debug("message not delivered to the client", "err", err)
			}
			m.unsent.Add(-1)
		case <-m.done:
			return
		}
	}
}

// serve runs one client session until it ends.
func (h *hub) serve(c clientConn) {
	defer c.Close()
	if init, ok := readInitialize(h.g.ctx, c, h.log); ok {
		h.join(c, init)
	}
}

// join serves a client session that has sent init until it ends.
func (h *hub) join(c clientConn, init *jsonrpc.Request) {
	ctx := h.g.ctx
	m := &member{
		conn: c,
		log:  h.log.With("client", c.Client().Hex()[:12]),
		out:  make(chan jsonrpc.Message, outboxSize),
		done: make(chan struct{}),
		last: time.Now(),
	}
	m.sess = h.mux.Join(m)
	var writer sync.WaitGroup
	defer func() {
		close(m.done) // first: a Send blocked on a full queue gives up
		m.sess.Leave()
		writer.Wait()
	}()
	if err := h.g.track(m, false); err != nil {
		refuseSession(ctx, c, init, err)
		return
	}
	defer h.g.untrack(m)
	writer.Go(func() { m.write(ctx) })
	m.sess.Handle(init)
	for {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if _, ok := msg.(*jsonrpc.Request); ok {
			m.mu.Lock()
			m.last = time.Now()
			m.mu.Unlock()
		}
		m.sess.Handle(msg)
	}
}
