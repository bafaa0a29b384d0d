package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/internal/mcpmux"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// perClient bridges one client session to an upstream session of its own.
// Messages pass through unchanged: ids are unique within the session (the
// contextvm.Server gives each request its event id), and so are progress
// tokens and subscriptions, because nobody else shares the upstream.
type perClient struct {
	g    *Gateway
	conn clientConn
	link *mcpmux.Link
	log  *slog.Logger

	mu        sync.Mutex
	last      time.Time
	starting  bool                   // until the client has its initialize answer
	inflight  map[jsonrpc.ID]pending // client requests awaiting the upstream
	fromUp    map[jsonrpc.ID]uint64  // upstream requests awaiting the client: the connection they came from
	subs      map[string]bool        // resources the client subscribed to, replayed after a restart
	internal  map[jsonrpc.ID]bool    // requests the gateway sent itself; their answers go nowhere
	nextInner int
}

// pending is a client request the upstream has not answered.
type pending struct {
	method string
	gen    uint64 // the upstream connection it went to
	start  time.Time
}

func newPerClient(g *Gateway, c clientConn) *perClient {
	return &perClient{
		g:        g,
		conn:     c,
		log:      g.opts.Logger.With("client", c.Client().Hex()[:12]),
		last:     time.Now(),
		starting: true,
		inflight: make(map[jsonrpc.ID]pending),
		fromUp:   make(map[jsonrpc.ID]uint64),
		subs:     make(map[string]bool),
		internal: make(map[jsonrpc.ID]bool),
	}
}

func (s *perClient) idleSince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *perClient) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starting || len(s.inflight) > 0
}

func (s *perClient) end() { s.conn.Close() }

func (s *perClient) client() nostr.PubKey { return s.conn.Client() }

// run serves the session until the client session ends.
func (s *perClient) run() {
	ctx := s.g.ctx
	defer s.conn.Close()
	init, ok := readInitialize(ctx, s.conn, s.log)
	if !ok {
		return
	}
	if err := s.g.track(s, true); err != nil {
		refuseSession(ctx, s.conn, init, err)
		return
	}
	defer s.g.untrack(s)

	start := time.Now()
	// Starting an upstream is the costliest thing a client can ask for (a
	// process of its own), so only a few start at once: a crowd of new
	// clients then waits its turn rather than starving the sessions that
	// run. Allowed clients wait in a line of their own, never behind a
	// crowd of strangers.
	starts := s.g.starts
	if s.g.known[s.client()] {
		starts = s.g.knownStarts
	}
	select {
	case starts <- struct{}{}:
	case <-ctx.Done():
		return
	}
	l, hs, err := mcpmux.OpenLink(ctx, s.g.linkOptions(init.Params, false))
	<-starts
	if err != nil {
		s.log.Warn("upstream session did not start", "err", err)
		s.g.metrics.answered(init.Method, start, "upstream_down")
		refuse(ctx, s.conn, init, CodeUpstreamUnavailable, "%v", err)
		return
	}
	s.link = l
	defer l.Close()
	// The upstream's own answer, byte for byte: its protocol version,
	// capabilities, serverInfo and instructions.
	if err := s.conn.Write(ctx, &jsonrpc.Response{ID: init.ID, Result: hs.Result}); err != nil {
		return
	}
	s.g.metrics.answered(init.Method, start, "ok")
	s.mu.Lock()
	s.starting = false
	s.mu.Unlock()
	// Only now what the upstream said before answering: had it gone first,
	// the client would have heard from a session it did not have yet.
	l.Start(s, hs.Early)

	for {
		msg, err := s.conn.Read(ctx)
		if err != nil {
			return
		}
		s.fromClient(msg)
	}
}

func (s *perClient) fromClient(msg jsonrpc.Message) {
	ctx := s.g.ctx
	switch m := msg.(type) {
	case *jsonrpc.Request:
		s.mu.Lock()
		s.last = time.Now()
		s.mu.Unlock()
		gen, up := s.link.Current()
		if !m.IsCall() {
			if up {
				if err := s.link.Write(gen, m); err != nil {
					s.log.Debug("notification not delivered upstream", "method", m.Method, "err", err)
				}
			}
			return
		}
		if !up {
			s.g.metrics.answered(m.Method, time.Now(), "upstream_down")
			refuse(ctx, s.conn, m, CodeUpstreamUnavailable, "%v; the gateway is restarting it, retry shortly", s.link.DownReason())
			return
		}
		s.mu.Lock()
		s.inflight[m.ID] = pending{method: m.Method, gen: gen, start: time.Now()}
		switch m.Method {
		case mcpmsg.MethodSubscribe, mcpmsg.MethodUnsubscribe:
			if uri := mcpmsg.StringParam(m.Params, "uri"); uri != "" {
				s.subs[uri] = m.Method == mcpmsg.MethodSubscribe
			}
		}
		s.mu.Unlock()
		if err := s.link.Write(gen, m); err != nil {
			if p, ok := s.take(m.ID); ok {
				s.g.metrics.answered(p.method, p.start, "upstream_down")
				refuse(ctx, s.conn, m, CodeUpstreamUnavailable, "%v", err)
			}
		}
	case *jsonrpc.Response:
		// The client's answer to a request of the upstream's.
		s.mu.Lock()
		gen, ok := s.fromUp[m.ID]
		delete(s.fromUp, m.ID)
		s.mu.Unlock()
		if !ok {
			s.log.Debug("dropping an answer to no request of the upstream's", "id", m.ID.Raw())
			return
		}
		if err := s.link.Write(gen, m); err != nil {
			s.log.Debug("answer not delivered upstream", "err", err)
		}
	}
}

// take removes a request from the in-flight set; ok is false if it was
// already answered.
func (s *perClient) take(id jsonrpc.ID) (pending, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inflight[id]
	delete(s.inflight, id)
	return p, ok
}

// FromUpstream implements mcpmux.Handler.
func (s *perClient) FromUpstream(gen uint64, msg jsonrpc.Message) {
	ctx := s.g.ctx
	switch m := msg.(type) {
	case *jsonrpc.Response:
		s.mu.Lock()
		internal := s.internal[m.ID]
		delete(s.internal, m.ID)
		s.mu.Unlock()
		if internal {
			if m.Error != nil {
				s.log.Warn("upstream refused a subscription replayed after its restart", "err", m.Error)
			}
			return
		}
		p, ok := s.take(m.ID)
		if !ok {
			s.log.Debug("dropping an upstream answer to no request in flight", "id", m.ID.Raw())
			return
		}
		outcome := "ok"
		if m.Error != nil {
			outcome = "error"
		}
		s.g.metrics.answered(p.method, p.start, outcome)
		s.conn.Write(ctx, m)
	case *jsonrpc.Request:
		if m.IsCall() {
			s.mu.Lock()
			s.fromUp[m.ID] = gen
			s.mu.Unlock()
		}
		if err := s.conn.Write(ctx, m); err != nil {
			s.log.Debug("message not delivered to the client", "method", m.Method, "err", err)
		}
	}
}

// UpstreamDown implements mcpmux.Handler: every request that was in flight
// on connection gen is answered, since its answer will never come.
func (s *perClient) UpstreamDown(gen uint64, why error) {
	s.mu.Lock()
	var dead []jsonrpc.ID
	var methods []pending
	for id, p := range s.inflight {
		if p.gen == gen {
			dead = append(dead, id)
			methods = append(methods, p)
			delete(s.inflight, id)
		}
	}
	clear(s.fromUp)
	clear(s.internal)
	s.mu.Unlock()
	for i, id := range dead {
		s.g.metrics.answered(methods[i].method, methods[i].start, "upstream_down")
		s.conn.Write(s.g.ctx, mcpmsg.ErrorResponse(id, CodeUpstreamUnavailable,
			"%v with this request in flight; the gateway is restarting it", why))
	}
}

// UpstreamRestarted implements mcpmux.Handler: the new upstream session is
// subscribed to what the client had subscribed to, so that updates keep
// coming.
func (s *perClient) UpstreamRestarted(gen uint64, _ json.RawMessage) {
	s.mu.Lock()
	var reqs []*jsonrpc.Request
	for uri, on := range s.subs {
		if !on {
			continue
		}
		s.nextInner++
		id := mcpmsg.StringID(fmt.Sprintf("cvm-gateway-resubscribe-%d", s.nextInner))
		s.internal[id] = true
		params, _ := mcpmsg.Marshal(map[string]string{"uri": uri})
		reqs = append(reqs, &jsonrpc.Request{ID: id, Method: mcpmsg.MethodSubscribe, Params: params})
	}
	s.mu.Unlock()
	for _, r := range reqs {
		if err := s.link.Write(gen, r); err != nil {
			s.log.Warn("could not replay a subscription", "err", err)
		}
	}
}
