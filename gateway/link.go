package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrUpstream marks failures of the upstream server itself: it could not be
// started, did not answer initialize, or exited. Messages read naturally:
// "upstream MCP server exited: exit status 1".
var ErrUpstream = errors.New("upstream MCP server")

// linkHandler receives what a link reads. Its methods are called from the
// link's one goroutine, in order, never concurrently.
type linkHandler interface {
	// fromUpstream is a message the upstream sent on connection gen,
	// after its initialize response.
	fromUpstream(gen uint64, msg jsonrpc.Message)
	// upstreamDown says connection gen ended, and why, before any restart.
	upstreamDown(gen uint64, why error)
	// upstreamRestarted says a replacement connection gen has completed
	// the handshake; the messages it sent before that follow.
	upstreamRestarted(gen uint64, result json.RawMessage)
}

type linkOptions struct {
	upstream Upstream
	// params of the initialize request, sent again on every restart.
	params      json.RawMessage
	initTimeout time.Duration
	restartMin  time.Duration
	restartMax  time.Duration
	metrics     *metrics
	log         *slog.Logger
}

// stableAfter is how long a restarted upstream must stay up for the restart
// backoff to start over; one that dies sooner keeps doubling it, so a crash
// loop settles at RestartMax instead of spinning.
const stableAfter = 10 * time.Second

// maxEarly bounds the messages held back while the upstream has not yet
// answered initialize. A server sends one or two (a list_changed); a
// flood means something is wrong.
const maxEarly = 1024

// writeFailedGrace is how long the handshake still reads after initialize
// could not be written: long enough for an exited child's last output and
// end of file, short enough not to wait on an HTTP server that is not
// there.
const writeFailedGrace = time.Second

// link is one upstream session that outlives its connection: when the
// connection ends (the child process died), it reconnects with backoff and
// performs the handshake again with the same initialize parameters.
//
// Writes carry the generation of the connection they are meant for, so a
// request can never reach a replacement connection its caller knows nothing
// about.
type link struct {
	opts   linkOptions
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine of run exits

	mu      sync.Mutex
	conn    mcp.Connection // nil while down
	gen     uint64
	downErr error // why conn is nil
	started bool
}

// handshake is the outcome of initializing one upstream connection.
type handshake struct {
	result json.RawMessage
	// early are messages the upstream sent before its initialize response.
	early []jsonrpc.Message
}

// openLink opens the first upstream connection and performs initialize. It
// sends notifications/initialized too when announce is set; otherwise the
// client sends its own, which the caller forwards. Call start to begin
// reading, and close to end the link.
func openLink(ctx context.Context, opts linkOptions, announce bool) (*link, handshake, error) {
	lctx, cancel := context.WithCancel(context.Background())
	l := &link{opts: opts, ctx: lctx, cancel: cancel, done: make(chan struct{})}
	conn, hs, err := l.dial(ctx, 1, announce)
	if err != nil {
		cancel()
		close(l.done)
		return nil, handshake{}, err
	}
	l.conn, l.gen = conn, 1
	return l, hs, nil
}

// start hands h the early messages of the first connection, then
// everything the upstream sends, until close.
func (l *link) start(h linkHandler, early []jsonrpc.Message) {
	l.mu.Lock()
	l.started = true
	conn := l.conn
	l.mu.Unlock()
	go l.run(h, conn, early)
}

// close ends the link and waits for its connection to be closed (for a
// child process: until it has exited).
func (l *link) close() {
	l.cancel()
	l.mu.Lock()
	started, conn := l.started, l.conn
	l.mu.Unlock()
	if started {
		<-l.done
		return
	}
	if conn != nil {
		conn.Close()
		l.opts.metrics.upstreamSessions.Dec()
	}
}

// current returns the generation of the live connection; up is false while
// the upstream is down.
func (l *link) current() (gen uint64, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen, l.conn != nil
}

// write sends msg on connection gen, failing if that connection is gone.
func (l *link) write(gen uint64, msg jsonrpc.Message) error {
	l.mu.Lock()
	conn, cur, why := l.conn, l.gen, l.downErr
	l.mu.Unlock()
	if conn == nil || cur != gen {
		if why == nil {
			why = fmt.Errorf("%w restarted", ErrUpstream)
		}
		return why
	}
	if err := conn.Write(l.ctx, msg); err != nil {
		return fmt.Errorf("%w: write: %w", ErrUpstream, err)
	}
	return nil
}

func (l *link) run(h linkHandler, conn mcp.Connection, early []jsonrpc.Message) {
	defer close(l.done)
	backoff := l.opts.restartMin
	for {
		gen, _ := l.current()
		upSince := time.Now()
		for _, m := range early {
			h.fromUpstream(gen, m)
		}
		readErr := l.pump(h, conn, gen)
		closeErr := conn.Close()
		l.opts.metrics.upstreamSessions.Dec()
		if l.ctx.Err() != nil {
			return
		}
		why := describeEnd(readErr, closeErr)
		l.mu.Lock()
		l.conn, l.downErr = nil, why
		l.mu.Unlock()
		l.opts.metrics.upstreamExits.Inc()
		l.opts.log.Warn("upstream session ended; restarting it", "err", why)
		h.upstreamDown(gen, why)

		if time.Since(upSince) >= stableAfter {
			backoff = l.opts.restartMin
		}
		var hs handshake
		var ok bool
		conn, hs, backoff, ok = l.restart(gen+1, backoff)
		if !ok {
			return
		}
		l.mu.Lock()
		l.conn, l.gen, l.downErr = conn, gen+1, nil
		l.mu.Unlock()
		l.opts.metrics.restarts.Inc()
		l.opts.log.Info("upstream session restarted")
		h.upstreamRestarted(gen+1, hs.result)
		early = hs.early
	}
}

// pump reads conn until it fails or the link closes.
func (l *link) pump(h linkHandler, conn mcp.Connection, gen uint64) error {
	for {
		msg, err := conn.Read(l.ctx)
		if err != nil {
			return err
		}
		h.fromUpstream(gen, msg)
	}
}

// restart dials until a connection completes the handshake, waiting
// backoff before each attempt and doubling it after each failure. It
// returns the backoff to use next time; ok is false if the link closed.
func (l *link) restart(gen uint64, backoff time.Duration) (mcp.Connection, handshake, time.Duration, bool) {
	for {
		// Jitter, so that many sessions whose upstreams died together do
		// not restart in lockstep.
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(wait):
		case <-l.ctx.Done():
			return nil, handshake{}, backoff, false
		}
		backoff = min(2*backoff, l.opts.restartMax)
		conn, hs, err := l.dial(l.ctx, gen, true)
		if err == nil {
			return conn, hs, backoff, true
		}
		if l.ctx.Err() != nil {
			return nil, handshake{}, backoff, false
		}
		l.mu.Lock()
		l.downErr = err
		l.mu.Unlock()
		l.opts.log.Warn("upstream did not restart; trying again", "err", err, "in", backoff)
	}
}

// dial opens one connection and performs initialize on it.
func (l *link) dial(ctx context.Context, gen uint64, announce bool) (mcp.Connection, handshake, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.initTimeout)
	defer cancel()
	conn, err := l.opts.upstream.Open(ctx)
	if err != nil {
		return nil, handshake{}, fmt.Errorf("%w could not be started: %w", ErrUpstream, err)
	}
	hs, err := l.initialize(ctx, conn, gen, announce)
	if err != nil {
		if closeErr := conn.Close(); closeErr != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%w)", err, closeErr)
		}
		return nil, handshake{}, err
	}
	l.opts.metrics.upstreamSessions.Inc()
	return conn, hs, nil
}

// initialize sends initialize and reads until its answer, holding back
// whatever else the upstream says first.
func (l *link) initialize(ctx context.Context, conn mcp.Connection, gen uint64, announce bool) (handshake, error) {
	id := mustID(fmt.Sprintf("cvm-gateway-initialize-%d", gen))
	// A child that has already exited fails the write (a broken pipe), but
	// what it printed and its exit status say more: read them either way.
	writeErr := conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "initialize", Params: l.opts.params})
	if writeErr != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, writeFailedGrace)
		defer cancel()
	}
	var hs handshake
	for {
		msg, err := conn.Read(ctx)
		switch {
		case writeErr != nil && errors.Is(err, context.DeadlineExceeded):
			return handshake{}, fmt.Errorf("%w did not take initialize: %w", ErrUpstream, writeErr)
		case errors.Is(err, context.DeadlineExceeded):
			return handshake{}, fmt.Errorf("%w did not answer initialize within %s", ErrUpstream, l.opts.initTimeout)
		case errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed):
			return handshake{}, fmt.Errorf("%w exited before answering initialize", ErrUpstream)
		case errors.As(err, new(*json.SyntaxError)):
			return handshake{}, fmt.Errorf("%w wrote something other than JSON-RPC where its answer to initialize belonged (%w)", ErrUpstream, err)
		case err != nil:
			return handshake{}, fmt.Errorf("%w: reading its answer to initialize: %w", ErrUpstream, err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == id {
			if resp.Error != nil {
				return handshake{}, fmt.Errorf("%w refused initialize: %w", ErrUpstream, resp.Error)
			}
			hs.result = resp.Result
			break
		}
		if len(hs.early) == maxEarly {
			return handshake{}, fmt.Errorf("%w sent %d messages without answering initialize", ErrUpstream, maxEarly)
		}
		hs.early = append(hs.early, msg)
	}
	if announce {
		if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
			return handshake{}, fmt.Errorf("%w: notifications/initialized: %w", ErrUpstream, err)
		}
	}
	return hs, nil
}

// describeEnd says why an upstream connection ended. For a child process,
// closing the connection reports its exit status.
func describeEnd(readErr, closeErr error) error {
	switch {
	case closeErr != nil:
		return fmt.Errorf("%w exited: %w", ErrUpstream, closeErr)
	case readErr == nil || errors.Is(readErr, io.EOF) || errors.Is(readErr, mcp.ErrConnectionClosed):
		return fmt.Errorf("%w closed the connection", ErrUpstream)
	default:
		return fmt.Errorf("%w: connection failed: %w", ErrUpstream, readErr)
	}
}

// downReason says why the upstream is down, or nil while it is up.
func (l *link) downReason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		return nil
	}
	return l.downErr
}
