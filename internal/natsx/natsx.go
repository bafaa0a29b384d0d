// Package natsx is cvm's NATS plumbing: one client connection per process
// with the reconnect policy cvm wants, its health as the rest of the
// program needs to see it, and JetStream on top.
//
// A node that cannot reach NATS when it starts fails at once (Connect
// returns an error wrapping ErrUnreachable); one that loses NATS later keeps
// running and reconnects for ever, and Conn.Up says whether the link is up
// at this moment, so that callers can answer "unavailable" instead of
// waiting. The client's asynchronous errors, such as a subscription that
// fell behind its pending limits and lost messages (nats.ErrSlowConsumer),
// are logged as warnings with the subject, never printed to stderr.
package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnreachable is wrapped by Connect's error when no NATS server answered.
var ErrUnreachable = errors.New("nats: unreachable")

// Options tune Connect. The zero value is usable.
type Options struct {
	// Name is the connection name the NATS server shows (default "cvm").
	Name string
	// ConnectTimeout bounds the first connection (default 5 s).
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnection attempts once the
	// link is lost (default 250 ms; the client adds jitter).
	ReconnectWait time.Duration
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
}

// Conn is a NATS connection and its JetStream context. Safe for concurrent
// use.
type Conn struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	URL string

	log *slog.Logger

	closed chan struct{} // closed by the client's closed callback, the last one

	mu        sync.Mutex
	up        bool
	changed   chan struct{} // closed and replaced on every change of up
	downSince time.Time
}

// Connect dials url and checks that JetStream answers. It fails fast, with
// an error wrapping ErrUnreachable, when no server answers within
// ConnectTimeout; after that the connection reconnects on its own for as
// long as it is open.
func Connect(ctx context.Context, url string, opts Options) (*Conn, error) {
	if opts.Name == "" {
		opts.Name = "cvm"
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	if opts.ReconnectWait <= 0 {
		opts.ReconnectWait = 250 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Conn{URL: url, log: opts.Logger.With("nats", url), changed: make(chan struct{}), closed: make(chan struct{})}
	nc, err := nats.Connect(url,
		nats.Name(opts.Name),
		nats.Timeout(opts.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(opts.ReconnectWait),
		nats.ReconnectBufSize(-1), // never buffer while down: callers answer "unavailable" instead
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			c.setUp(false)
			// The client also reports a disconnection when it is closed
			// on purpose (Close); that is no lost link and is not
			// reconnected.
			if nc.IsClosed() {
				return
			}
			c.log.Warn("NATS link lost; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.setUp(true)
			c.log.Info("NATS link restored")
		}),
		// Without it the client prints asynchronous errors to stderr. A
		// subscription that falls behind its pending limits loses
		// messages (nats.ErrSlowConsumer): its owner counts them
		// (Subscription.Dropped) if it sheds on purpose; this is the log
		// line for every subscription, the client's own included.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub == nil {
				c.log.Warn("NATS error", "err", err)
				return
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				dropped, _ := sub.Dropped()
				c.log.Warn("NATS messages dropped: a subscription fell behind its pending limits", "subject", sub.Subject, "dropped_total", dropped)
				return
			}
			c.log.Warn("NATS subscription error", "subject", sub.Subject, "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			c.setUp(false)
			c.log.Debug("NATS connection closed")
			close(c.closed)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	actx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	if _, err := js.AccountInfo(actx); err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("nats: %s has no JetStream (run nats-server -js): %w", url, err)
		}
		return nil, fmt.Errorf("%w: %s: JetStream did not answer: %w", ErrUnreachable, url, err)
	}
	c.NC, c.JS = nc, js
	c.setUp(nc.IsConnected())
	return c, nil
}

func (c *Conn) setUp(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up == up {
		return
	}
	c.up = up
	if !up {
		c.downSince = time.Now()
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// Up reports whether the link to NATS is up now.
func (c *Conn) Up() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

// Status reports whether the link is up and, when it is not, since when it
// has been down, and a channel that is closed at the next change.
func (c *Conn) Status() (up bool, downSince time.Time, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up, c.downSince, c.changed
}

// WaitUp waits until the link is up or ctx ends.
func (c *Conn) WaitUp(ctx context.Context) error {
	for {
		up, _, changed := c.Status()
		if up {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close drains nothing: it closes the connection at once, and returns once
// the client has run its last callback, so that nothing is logged about
// the connection after Close. Safe to call more than once.
func (c *Conn) Close() {
	c.NC.Close()
	<-c.closed
}
