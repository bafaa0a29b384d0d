package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/wsconn"
	"github.com/cvmgo/cvm/mcpx"
	"golang.org/x/time/rate"
)

// Close statuses the gateway sends.
const (
	closeNormal    = websocket.StatusNormalClosure
	closeGoingAway = websocket.StatusGoingAway
)

// hardFrameLimitFactor times MaxFrameBytes is where the gateway stops
// reading an oversized frame and closes the connection (1009). Frames
// between MaxFrameBytes and that are read, discarded and answered with a
// too_large error envelope, so a client that sends one large envelope
// learns why and keeps its connection, while a client streaming garbage
// cannot make the gateway read forever.
const hardFrameLimitFactor = 16

// session is one participant's WebSocket connection. The goroutine serving
// the HTTP request owns it and runs its read loop; it starts one writer and
// one pinger goroutine and waits for both before returning.
//
// The connection (wsconn) carries the gateway's policy: a push that
// overflows the send queue (frames or bytes) drops the connection at once,
// and so does a write past WriteTimeout, both with an abortive close.
type session struct {
	g       *Gateway
	t       *topic
	p       mcpx.Participant
	ws      *wsconn.Conn
	limiter *rate.Limiter // nil: unlimited; set by join
	// The connection's name in the roster, and the entry of an older
	// connection of the participant that it replaced.
	connID   string
	replaced *Member
	log      *slog.Logger

	closeOnce sync.Once
	done      chan struct{}    // closed when the session starts to close
	why       mcpx.LeaveReason // set before done is closed
	ctx       context.Context  // ends when the session starts to close: for waits of the read loop
	cancel    context.CancelFunc

	// window holds a token per envelope of this connection that waits for
	// its commit (Options.MaxUncommitted); appending counts those without
	// a place in the log's order yet (Append.Placed), so that the leave
	// waits for them.
	window    chan struct{}
	appending sync.WaitGroup
	// echoQ are this connection's own envelopes whose echo has not gone
	// out yet, in order (guarded by its topic's echoMu).
	echoQ []*echoWait
	// flight is the bytes of this connection's envelopes on their way
	// into the log, at most maxFlightBytes but for one envelope; freed
	// tells the read loop, waiting for room, that some were stored.
	flightMu sync.Mutex
	flight   int
	freed    chan struct{}

	// outMu orders what reaches the connection. While one of the
	// participant's own envelopes waits for its commit, every frame for it
	// queued later is held behind its echo (a slot), so that the echo
	// keeps its place in the topic's order: a client may count on seqs
	// only rising.
	outMu     sync.Mutex
	held      []*slot
	heldBytes int
}

// slot is a place in a session's outbound order: frames ready to go, or,
// until fill, a frame that is not ready yet (an echo waiting for its
// commit, a welcome waiting for its history).
type slot struct {
	frames [][]byte
	ready  bool
}

// wsOptions is the gateway's policy for its connections (see session).
func (g *Gateway) wsOptions() wsconn.Options {
	return wsconn.Options{
		Accept: websocket.AcceptOptions{
			Subprotocols:       []string{mcpx.Subprotocol},
			InsecureSkipVerify: true, // originAllowed ran before, with a JSON refusal
		},
		MaxQueueFrames: g.opts.SendQueueFrames,
		MaxQueueBytes:  g.opts.SendQueueBytes,
		WriteTimeout:   g.opts.WriteTimeout,
		ReadLimit:      g.opts.MaxFrameBytes,
		CloseLimit:     g.opts.MaxFrameBytes * hardFrameLimitFactor,
	}
}

func newSession(g *Gateway, t *topic, p mcpx.Participant, ws *wsconn.Conn) *session {
	s := &session{
		g:      g,
		t:      t,
		p:      p,
		ws:     ws,
		log:    g.log.With("topic", t.name, "participant", p.ID),
		done:   make(chan struct{}),
		window: make(chan struct{}, g.opts.MaxUncommitted),
		freed:  make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// run serves the connection until it ends.
func (s *session) run() {
	ctx := context.Background()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(s.writeLoop)
	wg.Go(func() { s.pingLoop(ctx) })
	if err := s.t.join(ctx, s); err != nil {
		s.log.Error("join failed", "err", err)
		s.close(websocket.StatusInternalError, "Internal server error", mcpx.LeaveClosed)
	} else {
		s.log.Info("participant joined", "name", s.p.Name, "kind", s.p.Kind)
		s.readLoop(ctx)
	}
	// Envelopes read before the end may still be on their way into the
	// log's order (to JetStream, on a cluster): they go before the leave
	// (each append ends within the backend's timeout).
	s.appending.Wait()
	why := mcpx.LeaveClosed
	if errors.Is(s.ws.Err(), wsconn.ErrSlowConsumer) {
		why = mcpx.LeaveSlowConsumer // the connection dropped itself; the read ended with it
	}
	s.close(closeNormal, "", why)
	s.t.leave(ctx, s, s.why)
	s.g.metrics.dropped.WithLabelValues(string(s.why)).Inc()
	s.log.Info("participant left", "reason", s.why)
}

// close starts an orderly close: the writer flushes what is queued, sends a
// close frame with code and reason, and the read loop ends. Only the first
// call counts.
func (s *session) close(code websocket.StatusCode, reason string, why mcpx.LeaveReason) {
	s.closeOnce.Do(func() {
		s.why = why
		s.ws.Close(code, reason)
		close(s.done)
		s.cancel()
	})
}

// kill drops the connection at once, with an abortive close: for peers
// that are not reading or not answering. It never blocks, so fan-out can
// call it.
func (s *session) kill(why mcpx.LeaveReason) {
	s.closeOnce.Do(func() {
		s.why = why
		close(s.done)
		s.cancel()
	})
	s.ws.Abort() // also unblocks the reader, the writer and a ping
}

// send queues a frame, behind any slot still held; a full queue drops the
// connection. Frames held count against the send queue's bounds too.
func (s *session) send(f []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if len(s.held) == 0 {
		s.push(f)
		return
	}
	s.held = append(s.held, &slot{frames: [][]byte{f}, ready: true})
	s.heldBytes += len(f)
	if len(s.held) > s.g.opts.SendQueueFrames || s.heldBytes > s.g.opts.SendQueueBytes {
		s.log.Warn("slow consumer dropped: too much queued behind an envelope waiting for its commit",
			"queued_frames_max", s.g.opts.SendQueueFrames, "queued_bytes_max", s.g.opts.SendQueueBytes)
		s.held, s.heldBytes = nil, 0
		s.kill(mcpx.LeaveSlowConsumer)
	}
}

// push hands f to the connection; outMu must be held.
func (s *session) push(f []byte) {
	if err := s.ws.Push(f); errors.Is(err, wsconn.ErrSlowConsumer) {
		s.log.Warn("slow consumer dropped: send queue full", "queued_frames_max", s.g.opts.SendQueueFrames, "queued_bytes_max", s.g.opts.SendQueueBytes)
		s.kill(mcpx.LeaveSlowConsumer)
	}
}

// hold reserves the next place in the connection's order for frames that
// are not ready yet; everything sent later waits behind it until fill.
func (s *session) hold() *slot {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	p := &slot{}
	s.held = append(s.held, p)
	return p
}

// fill gives p its frames (none: p leaves nothing) and sends everything
// no longer held behind a slot that is not ready.
func (s *session) fill(p *slot, frames ...[]byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	p.frames, p.ready = frames, true
	for _, f := range frames {
		s.heldBytes += len(f)
	}
	for len(s.held) > 0 && s.held[0].ready {
		for _, f := range s.held[0].frames {
			s.heldBytes -= len(f)
			s.push(f)
		}
		s.held[0] = nil
		s.held = s.held[1:]
	}
	if len(s.held) == 0 {
		s.held, s.heldBytes = nil, 0 // let the array go
	}
}

// errEnding: the session started to close while its read loop waited.
var errEnding = errors.New("session ending")

// takeWindow takes a place in the connection's window (MaxUncommitted),
// waiting, and counting the wait, while every place is taken.
func (s *session) takeWindow() error {
	select {
	case s.window <- struct{}{}:
		return nil
	default:
	}
	s.g.metrics.publisherWaits.WithLabelValues(boundCount).Inc()
	select {
	case s.window <- struct{}{}:
		return nil
	case <-s.ctx.Done():
		return errEnding
	}
}

// maxFlightBytes bounds the bytes of one connection's envelopes on their
// way into the log, beside MaxUncommitted: an envelope larger than it
// goes alone.
const maxFlightBytes = 4 << 20

// reserveFlight waits until n more bytes of envelopes may be in flight
// (only the read loop calls it).
func (s *session) reserveFlight(n int) error {
	for waited := false; ; waited = true {
		s.flightMu.Lock()
		if s.flight == 0 || s.flight+n <= maxFlightBytes {
			s.flight += n
			s.flightMu.Unlock()
			return nil
		}
		s.flightMu.Unlock()
		if !waited {
			s.g.metrics.publisherWaits.WithLabelValues(boundBytes).Inc()
		}
		select {
		case <-s.freed:
		case <-s.ctx.Done():
			return errEnding
		}
	}
}

// releaseFlight gives back what reserveFlight took.
func (s *session) releaseFlight(n int) {
	s.flightMu.Lock()
	s.flight -= n
	s.flightMu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// reject answers a refused frame with an error envelope.
func (s *session) reject(code mcpx.Code, correlation, message string, retryAfter time.Duration) {
	s.send(s.rejection(code, correlation, message, retryAfter))
}

// rejection is the error envelope reject sends, counted.
func (s *session) rejection(code mcpx.Code, correlation, message string, retryAfter time.Duration) []byte {
	s.g.metrics.rejected.WithLabelValues(string(code)).Inc()
	s.log.Debug("frame refused", "code", code, "envelope", correlation, "msg", message)
	e := errorEnvelope(s.g.opts.Now(), s.p.ID, code, correlation, message, retryAfter)
	return e.AppendJSON(nil)
}

func (s *session) readLoop(ctx context.Context) {
	limit := s.g.opts.MaxFrameBytes
	for {
		typ, data, err := s.ws.ReadMessage(ctx)
		if errors.Is(err, wsconn.ErrMessageDiscarded) {
			s.reject(mcpx.CodeTooLarge, "", fmt.Sprintf("frame is larger than the %d bytes allowed; it was discarded", limit), 0)
			continue
		}
		if err != nil {
			s.readEnded(err)
			return
		}
		if typ != websocket.MessageText {
			s.reject(mcpx.CodeInvalidEnvelope, "", "binary frames are not envelopes; send each envelope as a JSON text frame", 0)
			continue
		}
		s.handle(ctx, data)
	}
}

func (s *session) readEnded(err error) {
	switch {
	case errors.Is(err, wsconn.ErrMessageTooBig):
		s.log.Warn("frame over the hard limit; connection closed", "limit", s.g.opts.MaxFrameBytes*hardFrameLimitFactor)
	case websocket.CloseStatus(err) != -1:
		s.log.Debug("client closed", "status", websocket.CloseStatus(err))
	case errors.Is(err, net.ErrClosed), s.ws.Err() != nil:
	default:
		s.log.Debug("read ended", "err", err)
	}
}

// handle validates one frame and publishes it, or answers why not.
func (s *session) handle(ctx context.Context, data []byte) {
	e, _, decodeErr := mcpx.DecodeEnvelope(data)
	id := ""
	var ee *mcpx.EnvelopeError
	if decodeErr != nil && errors.As(decodeErr, &ee) {
		id = ee.EnvelopeID
	} else if decodeErr == nil {
		id = e.ID
	}
	// Every frame costs a token, well-formed or not, so that a flood of
	// garbage is limited like a flood of envelopes.
	if s.limiter != nil {
		if ok, wait := allow(s.limiter, s.g.opts.Now()); !ok {
			s.reject(mcpx.CodeRateLimited, id, fmt.Sprintf("rate limit of %g envelopes/s (burst %d) exceeded; retry after %d ms",
				s.g.opts.RatePerSecond, s.g.opts.RateBurst, max(wait.Milliseconds(), 1)), wait)
			return
		}
	}
	if decodeErr != nil {
		if ee == nil {
			ee = &mcpx.EnvelopeError{Code: mcpx.CodeInvalidEnvelope, EnvelopeID: id, Message: decodeErr.Error()}
		}
		s.reject(ee.Code, ee.EnvelopeID, ee.Message, 0)
		return
	}
	if e.From != s.p.ID {
		s.reject(mcpx.CodeFromMismatch, e.ID, fmt.Sprintf("from %q does not match your authenticated participant id %q", e.From, s.p.ID), 0)
		return
	}
	s.t.publish(s, e) // answers once the log stored it
}

// answer is how publishing e ended, for its sender: when it was accepted,
// nothing more than its echo (the acknowledgement), or an error envelope
// naming the recipients that were absent; else an error envelope saying
// why not. Nil: nothing to say.
func (s *session) answer(e *mcpx.Envelope, absent []string, err error) []byte {
	switch {
	case errors.Is(err, errEnding):
		return nil // the connection is closing: nobody to answer
	case errors.Is(err, ErrNotStored):
		s.log.Error("envelope delivered but not stored", "envelope", e.ID, "err", err)
		return s.rejection(mcpx.CodeInternal, e.ID, "the envelope was delivered to the participants present but could not be stored in history", 0)
	case errors.Is(err, ErrUnavailable):
		retry := s.g.retryAfter()
		s.log.Warn("envelope refused: NATS unavailable", "envelope", e.ID, "err", err)
		return s.rejection(mcpx.CodeUnavailable, e.ID, fmt.Sprintf("the gateway lost its link to NATS, so the envelope was not published; send it again in %d ms", retry.Milliseconds()), retry)
	case errors.Is(err, errReplaced):
		s.log.Info("envelope from a replaced connection refused", "envelope", e.ID)
		return s.rejection(mcpx.CodeFromMismatch, e.ID, "this connection was replaced by a newer one for the same participant", 0)
	case err != nil:
		s.log.Error("publish failed", "envelope", e.ID, "err", err)
		return s.rejection(mcpx.CodeInternal, e.ID, "the gateway could not publish the envelope; it was not delivered", 0)
	}
	s.g.metrics.accepted.Inc()
	if len(absent) > 0 {
		// Not "it is in history": that is true only once it is committed.
		return s.rejection(mcpx.CodeUnknownRecipient, e.ID, fmt.Sprintf("not in the topic, so not delivered live: %s", strings.Join(absent, ", ")), 0)
	}
	return nil
}

// allow takes a token if one is available, else reports how long until one is.
func allow(l *rate.Limiter, now time.Time) (bool, time.Duration) {
	if l.AllowN(now, 1) {
		return true, 0
	}
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return false, wait
}

// writeLoop runs the connection's writer until the connection ends.
func (s *session) writeLoop() {
	if err := s.ws.Run(); errors.Is(err, wsconn.ErrWriteTimeout) {
		s.log.Warn("slow consumer dropped: write timed out", "timeout", s.g.opts.WriteTimeout)
		s.kill(mcpx.LeaveSlowConsumer)
	}
}

// pingLoop checks liveness: a peer that does not answer a ping within
// PongTimeout is gone (half-open TCP never errors on its own), and one that
// does gets a presence heartbeat.
func (s *session) pingLoop(ctx context.Context) {
	if s.g.opts.HeartbeatInterval < 0 {
		return
	}
	tick := time.NewTicker(s.g.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.g.opts.PongTimeout)
		err := s.ws.Ping(pctx)
		cancel()
		select {
		case <-s.done:
			return
		default:
		}
		if err != nil {
			if s.ws.Err() != nil {
				return // the connection ended on its own account; run says why
			}
			s.log.Info("no pong in time; dropping the connection", "timeout", s.g.opts.PongTimeout, "err", err)
			s.kill(mcpx.LeaveTimeout)
			return
		}
		s.t.heartbeat(ctx, s)
	}
}
