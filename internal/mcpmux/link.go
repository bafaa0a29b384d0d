package mcpmux

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler receives what a Link reads. Its methods are called from the
// link's one goroutine, in order, never concurrently.
type Handler interface {
	// FromUpstream is a message the upstream sent on connection gen, after
	// its initialize response.
	FromUpstream(gen uint64, msg jsonrpc.Message)
	// UpstreamDown says connection gen ended, and why, before any restart.
	UpstreamDown(gen uint64, why error)
	// UpstreamRestarted says a replacement connection gen has completed
	// the handshake with result; the messages it sent before that follow.
	UpstreamRestarted(gen uint64, result json.RawMessage)
}

// LinkEvents are told of a link's connections, for metrics. Any may be
// nil. They are called from the goroutine that opens or closes the
// connection.
type LinkEvents struct {
	Opened    func() // a connection completed the handshake
	Closed    func() // such a connection was closed
	Exited    func() // the upstream ended a connection on its own
	Restarted func() // a replacement connection completed the handshake
}

// LinkOptions configure a Link. Zero durations take the defaults beside
// them.
type LinkOptions struct {
	Upstream Upstream
	// Params of the initialize request, sent again on every restart.
	Params json.RawMessage
	// Initialized makes the link send notifications/initialized after the
	// handshake; without it the caller forwards its client's own.
	Initialized bool

	InitializeTimeout time.Duration // the upstream's answer to initialize (30 s: npx fetches a server on first use)
	RestartMin        time.Duration // the first backoff before a restart (100 ms), doubling
	RestartMax        time.Duration // the longest backoff (30 s)
	// StableAfter is how long a restarted upstream must stay up for the
	// backoff to start over (10 s); one that dies sooner keeps doubling
	// it, so a crash loop settles at RestartMax instead of spinning.
	StableAfter time.Duration

	Events LinkEvents
	Logger *slog.Logger
}

func (o LinkOptions) withDefaults() LinkOptions {
	o.InitializeTimeout = cmp.Or(o.InitializeTimeout, 30*time.Second)
	o.RestartMin = cmp.Or(o.RestartMin, 100*time.Millisecond)
	o.RestartMax = max(cmp.Or(o.RestartMax, 30*time.Second), o.RestartMin)
	o.StableAfter = cmp.Or(o.StableAfter, 10*time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, f := range []*func(){&o.Events.Opened, &o.Events.Closed, &o.Events.Exited, &o.Events.Restarted} {
		if *f == nil {
			*f = func() {}
		}
	}
	return o
}

// maxEarly bounds the messages held back while the upstream has not yet
// answered initialize. A server sends one or two (a list_changed); a flood
// means something is wrong.
const maxEarly = 1024

// writeFailedGrace is how long the handshake still reads after initialize
// could not be written: long enough for an exited child's last output and
// end of file, short enough not to wait on an HTTP server that is not
// there.
const writeFailedGrace = time.Second

// Link is one upstream session that outlives its connection: when the
// connection ends it reconnects with backoff and performs the handshake
// again with the same initialize parameters. Its methods are safe for
// concurrent use.
type Link struct {
	opts   LinkOptions
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine of run exits

	mu      sync.Mutex
	conn    mcp.Connection // nil while down
	gen     uint64
	downErr error // why conn is nil
	started bool
}

// Handshake is the outcome of initializing one upstream connection.
type Handshake struct {
	Result json.RawMessage
	// Early are the messages the upstream sent before its initialize
	// response.
	Early []jsonrpc.Message
}

// OpenLink opens the first upstream connection and performs initialize.
// Call Start to begin reading, and Close to end the link.
func OpenLink(ctx context.Context, opts LinkOptions) (*Link, Handshake, error) {
	if opts.Upstream == nil {
		return nil, Handshake{}, errors.New("mcpmux: LinkOptions.Upstream is required")
	}
	opts = opts.withDefaults()
	lctx, cancel := context.WithCancel(context.Background())
	l := &Link{opts: opts, ctx: lctx, cancel: cancel, done: make(chan struct{})}
	conn, hs, err := l.dial(ctx, 1)
	if err != nil {
		cancel()
		close(l.done)
		return nil, Handshake{}, err
	}
	l.conn, l.gen = conn, 1
	return l, hs, nil
}

// Start hands h the early messages of the first connection, then
// everything the upstream sends, until Close. It is called at most once.
func (l *Link) Start(h Handler, early []jsonrpc.Message) {
	l.mu.Lock()
	l.started = true
	conn := l.conn
	l.mu.Unlock()
	go l.run(h, conn, early)
}

// Close ends the link and waits for its connection to be closed (for a
// child process: until it has exited) and for its goroutine to end.
func (l *Link) Close() {
	l.cancel()
	l.mu.Lock()
	started, conn := l.started, l.conn
	l.conn = nil
	l.mu.Unlock()
	if started {
		<-l.done
		return
	}
	if conn != nil {
		conn.Close()
		l.opts.Events.Closed()
	}
}

// Current returns the generation of the live connection; up is false while
// the upstream is down.
func (l *Link) Current() (gen uint64, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen, l.conn != nil
}

// DownReason says why the upstream is down, or nil while it is up.
func (l *Link) DownReason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		return nil
	}
	if l.downErr == nil {
		return fmt.Errorf("%w closed", ErrUpstream)
	}
	return l.downErr
}

// Write sends msg on connection gen, failing if that connection is gone.
func (l *Link) Write(gen uint64, msg jsonrpc.Message) error {
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

func (l *Link) run(h Handler, conn mcp.Connection, early []jsonrpc.Message) {
	defer close(l.done)
	backoff := l.opts.RestartMin
	for {
		gen, _ := l.Current()
		upSince := time.Now()
		for _, m := range early {
			h.FromUpstream(gen, m)
		}
		readErr := l.pump(h, conn, gen)
		l.mu.Lock()
		l.conn = nil
		l.mu.Unlock()
		closeErr := conn.Close()
		l.opts.Events.Closed()
		if l.ctx.Err() != nil {
			return
		}
		why := describeEnd(readErr, closeErr)
		l.mu.Lock()
		l.downErr = why
		l.mu.Unlock()
		l.opts.Events.Exited()
		l.opts.Logger.Warn("upstream session ended; restarting it", "err", why)
		h.UpstreamDown(gen, why)

		if time.Since(upSince) >= l.opts.StableAfter {
			backoff = l.opts.RestartMin
		}
		var hs Handshake
		var ok bool
		conn, hs, backoff, ok = l.restart(gen+1, backoff)
		if !ok {
			return
		}
		l.mu.Lock()
		l.conn, l.gen, l.downErr = conn, gen+1, nil
		l.mu.Unlock()
		l.opts.Events.Restarted()
		l.opts.Logger.Info("upstream session restarted")
		h.UpstreamRestarted(gen+1, hs.Result)
		early = hs.Early
	}
}

// pump reads conn until it fails or the link closes.
func (l *Link) pump(h Handler, conn mcp.Connection, gen uint64) error {
	for {
		msg, err := conn.Read(l.ctx)
		if err != nil {
			return err
		}
		h.FromUpstream(gen, msg)
	}
}

// restart dials until a connection completes the handshake, waiting
// backoff before each attempt and doubling it after each failure. It
// returns the backoff to use next time; ok is false if the link closed.
func (l *Link) restart(gen uint64, backoff time.Duration) (mcp.Connection, Handshake, time.Duration, bool) {
	for {
		// Jitter, so that many sessions whose upstreams died together do
		// not restart in lockstep.
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.ctx.Done():
			t.Stop()
			return nil, Handshake{}, backoff, false
		}
		backoff = min(2*backoff, l.opts.RestartMax)
		conn, hs, err := l.dial(l.ctx, gen)
		if err == nil {
			return conn, hs, backoff, true
		}
		if l.ctx.Err() != nil {
			return nil, Handshake{}, backoff, false
		}
		l.mu.Lock()
		l.downErr = err
		l.mu.Unlock()
		l.opts.Logger.Warn("upstream did not restart; trying again", "err", err, "in", backoff)
	}
}

// dial opens one connection and performs initialize on it.
func (l *Link) dial(ctx context.Context, gen uint64) (mcp.Connection, Handshake, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.InitializeTimeout)
	defer cancel()
	conn, err := l.opts.Upstream.Open(ctx)
	if err != nil {
		return nil, Handshake{}, fmt.Errorf("%w could not be started: %w", ErrUpstream, err)
	}
	hs, err := l.initialize(ctx, conn, gen)
	if err != nil {
		if closeErr := conn.Close(); closeErr != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%w)", err, closeErr)
		}
		return nil, Handshake{}, err
	}
	l.opts.Events.Opened()
	return conn, hs, nil
}

// initialize sends initialize and reads until its answer, holding back
// whatever else the upstream says first.
func (l *Link) initialize(ctx context.Context, conn mcp.Connection, gen uint64) (Handshake, error) {
	id := mcpmsg.StringID(fmt.Sprintf("cvm-initialize-%d", gen))
	// A child that has already exited fails the write (a broken pipe), but
	// what it printed and its exit status say more: read them either way.
	writeErr := conn.Write(ctx, &jsonrpc.Request{ID: id, Method: mcpmsg.MethodInitialize, Params: l.opts.Params})
	if writeErr != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, writeFailedGrace)
		defer cancel()
	}
	var hs Handshake
	for {
		msg, err := conn.Read(ctx)
		switch {
		case writeErr != nil && errors.Is(err, context.DeadlineExceeded):
			return Handshake{}, fmt.Errorf("%w did not take initialize: %w", ErrUpstream, writeErr)
		case errors.Is(err, context.DeadlineExceeded):
			return Handshake{}, fmt.Errorf("%w did not answer initialize within %s", ErrUpstream, l.opts.InitializeTimeout)
		case errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed):
			return Handshake{}, fmt.Errorf("%w exited before answering initialize", ErrUpstream)
		case errors.As(err, new(*json.SyntaxError)):
			return Handshake{}, fmt.Errorf("%w wrote something other than JSON-RPC where its answer to initialize belonged (%w)", ErrUpstream, err)
		case err != nil:
			return Handshake{}, fmt.Errorf("%w: reading its answer to initialize: %w", ErrUpstream, err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == id {
			if resp.Error != nil {
				return Handshake{}, fmt.Errorf("%w refused initialize: %w", ErrUpstream, resp.Error)
			}
			hs.Result = resp.Result
			break
		}
		if len(hs.Early) == maxEarly {
			return Handshake{}, fmt.Errorf("%w sent %d messages without answering initialize", ErrUpstream, maxEarly)
		}
		hs.Early = append(hs.Early, msg)
	}
	if l.opts.Initialized {
		if err := conn.Write(ctx, &jsonrpc.Request{Method: mcpmsg.MethodInitialized, Params: json.RawMessage(`{}`)}); err != nil {
			return Handshake{}, fmt.Errorf("%w: notifications/initialized: %w", ErrUpstream, err)
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
