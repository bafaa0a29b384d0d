package nostrx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
)

// errDisconnected is what a publish waiting for an OK sees when the
// connection drops first.
var errDisconnected = errors.New("relay connection dropped")

// maxRelayMessage bounds one message from a relay. A gift wrap of the
// largest NIP-44 payload is about 88 KB; stored-event replays stay far below.
const maxRelayMessage = 4 << 20

// relayConn is the pool's connection to one relay. Its run loop owns the
// websocket: it dials, reads, and redials with backoff. Other goroutines
// publish and subscribe through its methods.
type relayConn struct {
	pool *Pool
	url  string
	log  *slog.Logger

	mu             sync.Mutex
	conn           *websocket.Conn // nil while disconnected
	upCh           chan struct{}   // closed when a connection is established
	disconnectedAt time.Time
	waiters        map[nostr.ID][]chan okReply
	subs           map[string]*Subscription
	authed         chan struct{} // closed when AUTH succeeded on the current connection
}

type okReply struct {
	ok     bool
	reason string
	err    error // set when the connection dropped before an answer
}

func newRelayConn(p *Pool, url string) *relayConn {
	return &relayConn{
		pool:    p,
		url:     url,
		log:     p.opts.Logger.With("relay", url),
		upCh:    make(chan struct{}),
		waiters: make(map[nostr.ID][]chan okReply),
		subs:    make(map[string]*Subscription),
		authed:  make(chan struct{}),
	}
}

func (rc *relayConn) run(ctx context.Context) {
	backoff := rc.pool.opts.ReconnectMin
	for ctx.Err() == nil {
		dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, _, err := websocket.Dial(dialCtx, rc.url, nil)
		cancel()
		if err != nil {
			rc.log.Debug("relay dial failed", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(jitter(backoff)):
			}
			backoff = min(2*backoff, rc.pool.opts.ReconnectMax)
			continue
		}
		conn.SetReadLimit(maxRelayMessage)
		backoff = rc.pool.opts.ReconnectMin
		rc.log.Debug("relay connected")
		rc.attach(ctx, conn)
		err = rc.serve(ctx, conn)
		rc.detach()
		conn.CloseNow()
		if ctx.Err() == nil {
			rc.log.Info("relay connection lost; reconnecting", "err", err)
		}
	}
}

// jitter spreads reconnects of many clients over ±25% of d.
func jitter(d time.Duration) time.Duration {
	return d - d/4 + time.Duration(rand.Int64N(int64(d)/2+1))
}

func (rc *relayConn) attach(ctx context.Context, conn *websocket.Conn) {
	rc.mu.Lock()
	rc.conn = conn
	close(rc.upCh)
	disconnectedAt := rc.disconnectedAt
	subs := make([]*Subscription, 0, len(rc.subs))
	for _, s := range rc.subs {
		subs = append(subs, s)
	}
	rc.mu.Unlock()
	for _, s := range subs {
		rc.sendREQ(ctx, conn, s, s.resumeFilters(disconnectedAt, rc.pool.opts.ResubscribeOverlap))
	}
}

func (rc *relayConn) detach() {
	rc.mu.Lock()
	rc.conn = nil
	rc.upCh = make(chan struct{})
	rc.authed = make(chan struct{})
	rc.disconnectedAt = time.Now()
	waiters := rc.waiters
	rc.waiters = make(map[nostr.ID][]chan okReply)
	rc.mu.Unlock()
	for _, ws := range waiters {
		for _, w := range ws {
			w <- okReply{err: errDisconnected}
		}
	}
}

// serve reads from conn until it fails, probing it with pings meanwhile.
// Every goroutine it starts for the connection (the pinger, NIP-42
// answers) ends with it: they run under a context serve cancels, and serve
// waits for them before it returns, so the pool's Close, which waits for
// run, waits for them too.
func (rc *relayConn) serve(ctx context.Context, conn *websocket.Conn) error {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which runs first
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		t := time.NewTicker(rc.pool.opts.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, rc.pool.opts.PingTimeout)
				err := conn.Ping(pctx)
				pcancel()
				if err != nil && ctx.Err() == nil {
					rc.log.Info("relay did not answer a ping; dropping the connection", "err", err)
					conn.CloseNow()
					return
				}
			}
		}
	})
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		rc.handle(ctx, conn, string(data), &wg)
	}
}

// handle takes one message from the relay. Work that must wait for the
// relay (an AUTH round trip) goes on a goroutine in wg, serve's, so that the
// read loop never waits for it; only serve's goroutine adds to wg, before it
// waits, so no Add can race the Wait.
func (rc *relayConn) handle(ctx context.Context, conn *websocket.Conn, msg string, wg *sync.WaitGroup) {
	env, err := nostr.ParseMessage(msg)
	if env == nil {
		rc.log.Debug("unparseable relay message", "err", err)
		return
	}
	switch env := env.(type) {
	case *nostr.EventEnvelope:
		if env.SubscriptionID == nil {
			return
		}
		rc.mu.Lock()
		s := rc.subs[*env.SubscriptionID]
		rc.mu.Unlock()
		if s != nil {
			s.deliver(env.Event)
		}
	case *nostr.EOSEEnvelope:
		rc.mu.Lock()
		s := rc.subs[string(*env)]
		rc.mu.Unlock()
		if s != nil {
			s.markEOSE(rc.url)
		}
	case *nostr.OKEnvelope:
		rc.mu.Lock()
		ws := rc.waiters[env.EventID]
		delete(rc.waiters, env.EventID)
		rc.mu.Unlock()
		for _, w := range ws {
			w <- okReply{ok: env.OK, reason: env.Reason}
		}
	case *nostr.ClosedEnvelope:
		if strings.HasPrefix(env.Reason, "auth-required:") && rc.pool.opts.Signer != nil {
			rc.log.Debug("subscription needs AUTH; will resend after authenticating", "sub", env.SubscriptionID)
			wg.Go(func() { rc.resubscribeAfterAuth(ctx, conn, env.SubscriptionID) })
			return
		}
		rc.log.Warn("relay closed a subscription", "sub", env.SubscriptionID, "reason", env.Reason)
	case *nostr.NoticeEnvelope:
		rc.log.Info("relay notice", "notice", string(*env))
	case *nostr.AuthEnvelope:
		if env.Challenge != nil && rc.pool.opts.Signer != nil {
			challenge := *env.Challenge
			wg.Go(func() { rc.authenticate(ctx, conn, challenge) })
		}
	}
}

// authenticate answers a NIP-42 challenge on conn.
func (rc *relayConn) authenticate(ctx context.Context, conn *websocket.Conn, challenge string) {
	evt := nostr.Event{
		CreatedAt: nostr.Now(),
		Kind:      nostr.KindClientAuthentication,
		Tags:      nostr.Tags{{"relay", rc.url}, {"challenge", challenge}},
	}
	if err := rc.pool.opts.Signer.SignEvent(ctx, &evt); err != nil {
		rc.log.Warn("signing AUTH event failed", "err", err)
		return
	}
	frame, err := nostr.AuthEnvelope{Event: evt}.MarshalJSON()
	if err != nil {
		return
	}
	reply := rc.expectOK(evt.ID)
	ctx, cancel := context.WithTimeout(ctx, rc.pool.opts.PublishTimeout)
	defer cancel()
	if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
		rc.dropWaiter(evt.ID, reply)
		return
	}
	select {
	case r := <-reply:
		if !r.ok {
			rc.log.Warn("relay refused AUTH", "reason", r.reason, "err", r.err)
			return
		}
	case <-ctx.Done():
		rc.dropWaiter(evt.ID, reply)
		rc.log.Warn("relay did not answer AUTH")
		return
	}
	rc.mu.Lock()
	if rc.conn == conn {
		select {
		case <-rc.authed:
		default:
			close(rc.authed)
		}
	}
	rc.mu.Unlock()
	rc.log.Debug("authenticated to relay")
}

func (rc *relayConn) resubscribeAfterAuth(ctx context.Context, conn *websocket.Conn, subID string) {
	rc.mu.Lock()
	authed := rc.authed
	s := rc.subs[subID]
	rc.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, rc.pool.opts.PublishTimeout)
	defer cancel()
	select {
	case <-authed:
		rc.sendREQ(ctx, conn, s, s.filters)
	case <-ctx.Done():
		rc.log.Warn("subscription refused: relay requires AUTH and authentication did not complete", "sub", subID)
	}
}

func (rc *relayConn) expectOK(id nostr.ID) chan okReply {
	reply := make(chan okReply, 1)
	rc.mu.Lock()
	rc.waiters[id] = append(rc.waiters[id], reply)
	rc.mu.Unlock()
	return reply
}

func (rc *relayConn) dropWaiter(id nostr.ID, reply chan okReply) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ws := rc.waiters[id]
	for i, w := range ws {
		if w == reply {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(rc.waiters, id)
	} else {
		rc.waiters[id] = ws
	}
}

// waitUp returns the current connection, waiting for one until ctx ends.
func (rc *relayConn) waitUp(ctx context.Context) (*websocket.Conn, error) {
	for {
		rc.mu.Lock()
		conn, up := rc.conn, rc.upCh
		rc.mu.Unlock()
		if conn != nil {
			return conn, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("not connected: %w", context.Cause(ctx))
		}
	}
}

// publish sends one EVENT frame and waits for the relay's OK, trying again
// after a reconnect or an AUTH, up to the pool's attempt limit.
func (rc *relayConn) publish(ctx context.Context, id nostr.ID, frame []byte) RelayResult {
	res := RelayResult{URL: rc.url}
	for attempt := 1; ; attempt++ {
		conn, err := rc.waitUp(ctx)
		if err != nil {
			res.Err = err
			return res
		}
		reply := rc.expectOK(id)
		actx, cancel := context.WithTimeout(ctx, rc.pool.opts.PublishTimeout)
		r, err := rc.roundTrip(actx, conn, id, frame, reply)
		cancel()
		switch {
		case err != nil:
			res.Err = err
		case r.err != nil:
			res.Err = r.err
		default:
			res.OK, res.Reason, res.Err = r.ok, r.reason, nil
			if r.ok || !strings.HasPrefix(r.reason, "auth-required:") || rc.pool.opts.Signer == nil {
				return res
			}
			if !rc.waitAuthed(ctx) {
				return res
			}
		}
		if attempt >= rc.pool.opts.PublishAttempts || ctx.Err() != nil {
			return res
		}
	}
}

func (rc *relayConn) roundTrip(ctx context.Context, conn *websocket.Conn, id nostr.ID, frame []byte, reply chan okReply) (okReply, error) {
	if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
		rc.dropWaiter(id, reply)
		return okReply{}, err
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		rc.dropWaiter(id, reply)
		return okReply{}, fmt.Errorf("no OK: %w", context.Cause(ctx))
	}
}

func (rc *relayConn) waitAuthed(ctx context.Context) bool {
	rc.mu.Lock()
	authed := rc.authed
	rc.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, rc.pool.opts.PublishTimeout)
	defer cancel()
	select {
	case <-authed:
		return true
	case <-ctx.Done():
		return false
	}
}

func (rc *relayConn) subscribe(s *Subscription) {
	rc.mu.Lock()
	rc.subs[s.id] = s
	conn := rc.conn
	rc.mu.Unlock()
	if conn != nil {
		ctx, cancel := context.WithTimeout(rc.pool.ctx, rc.pool.opts.PublishTimeout)
		defer cancel()
		rc.sendREQ(ctx, conn, s, s.filters)
	}
}

func (rc *relayConn) unsubscribe(s *Subscription) {
	rc.mu.Lock()
	delete(rc.subs, s.id)
	conn := rc.conn
	rc.mu.Unlock()
	if conn != nil && rc.pool.ctx.Err() == nil {
		frame, _ := nostr.CloseEnvelope(s.id).MarshalJSON()
		ctx, cancel := context.WithTimeout(rc.pool.ctx, time.Second)
		defer cancel()
		conn.Write(ctx, websocket.MessageText, frame)
	}
}

func (rc *relayConn) sendREQ(ctx context.Context, conn *websocket.Conn, s *Subscription, fs []nostr.Filter) {
	frame, err := reqFrame(s.id, fs)
	if err != nil {
		rc.log.Error("encode REQ", "err", err)
		return
	}
	if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
		// The read loop sees the broken connection and the next attach resends.
		rc.log.Debug("sending REQ failed", "err", err)
	}
}

// reqFrame is ["REQ", id, filter…]. The nostr library's ReqEnvelope
// writes the first filter only.
func reqFrame(id string, fs []nostr.Filter) ([]byte, error) {
	frame := make([]any, 0, 2+len(fs))
	frame = append(frame, "REQ", id)
	for _, f := range fs {
		frame = append(frame, f)
	}
	return json.Marshal(frame)
}
