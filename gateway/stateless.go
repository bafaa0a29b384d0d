package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stateless serves, in PerClient mode, the client sessions that began
// without an initialize (stateless clients, CEP-35: every one-shot cvm call
// to a server it knows) through one upstream session, a hub started with
// the first of them and closed after the last. An upstream session each
// would cost a process per one-shot client, kept for IdleTimeout.
//
// Sharing takes nothing from these clients that they had: they declared no
// capabilities (the contextvm.Server initialized their sessions with none),
// so the upstream may ask them nothing, which is what the hub declares to
// it; they get no broadcast notifications; and what the upstream keeps
// between their calls no session of theirs was promised. What they share
// is that state, among themselves only: a client that initializes gets an
// upstream session of its own as ever. Options.IsolateStateless is for
// upstreams whose state stateless clients must not share.
type stateless struct {
	g   *Gateway
	log *slog.Logger

	mu    sync.Mutex
	start *hubStart // the hub, or its start under way; nil while no session uses it
	users int       // sessions holding start
}

// hubStart is one start of the hub; done is closed once it has come up
// (hub) or failed (err).
type hubStart struct {
	done chan struct{}
	hub  *hub
	err  error
}

func newStateless(g *Gateway) *stateless {
	return &stateless{g: g, log: g.opts.Logger.With("upstream", "stateless clients")}
}

// serve runs one stateless client session until it ends.
func (s *stateless) serve(c clientConn) {
	ctx := s.g.ctx
	defer c.Close()
	init, ok := readInitialize(ctx, c, s.log)
	if !ok {
		return
	}
	start := time.Now()
	h, err := s.acquire(ctx)
	if err != nil {
		// Answering the initialize made on the client's behalf answers
		// the client's request with this error.
		s.log.Warn("upstream session did not start", "err", err)
		s.g.metrics.answered(init.Method, start, "upstream_down")
		refuse(ctx, c, init, CodeUpstreamUnavailable, "%v", err)
		return
	}
	defer s.release()
	h.join(c, init)
}

// acquire returns the hub, starting it if no session uses one; each
// successful acquire is paired with a release. Sessions that arrive while
// it starts wait for that start, and share its failure.
func (s *stateless) acquire(ctx context.Context) (*hub, error) {
	s.mu.Lock()
	st := s.start
	first := st == nil
	if first {
		st = &hubStart{done: make(chan struct{})}
		s.start = st
	}
	s.users++
	s.mu.Unlock()
	if first {
		st.hub, st.err = s.open(ctx)
		close(st.done)
	}
	<-st.done
	if st.err != nil {
		s.release()
		return nil, st.err
	}
	return st.hub, nil
}

// release ends a session's use of the hub; the last one closes it, and
// waits for the upstream to exit.
func (s *stateless) release() {
	s.mu.Lock()
	s.users--
	var last *hub
	if s.users == 0 {
		last = s.start.hub // nil after a failed start
		s.start = nil
	}
	s.mu.Unlock()
	if last != nil {
		s.log.Debug("closing the upstream session: no stateless client is left")
		last.close()
	}
}

// open starts the hub, in turn with the per-client upstream sessions that
// are starting.
func (s *stateless) open(ctx context.Context) (*hub, error) {
	select {
	case s.g.starts <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.g.starts }()
	h, err := newHub(ctx, s.g, hubOptions{
		name: "cvm gateway (stateless clients)",
		hint: "a client without a session (CEP-35) cannot be asked anything: call with a session (initialize) instead",
		caps: &mcp.ClientCapabilities{},
		log:  s.log,
	})
	if err == nil {
		s.log.Debug("started the upstream session of stateless clients")
	}
	return h, err
}
