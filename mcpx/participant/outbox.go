package participant

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/mcpx"
)

// outboxMax bounds the envelopes kept for re-checking after a reconnect.
// The pinger confirms entries every PingInterval, so only a client sending
// thousands of envelopes between two pings reaches it; the oldest are then
// forgotten (and could be lost if the connection fails right then).
const outboxMax = 4096

// maxRateRetries bounds how often an envelope refused with rate_limited is
// sent again after the gateway's retry_after_ms.
const maxRateRetries = 5

// outEntry is an envelope written (or being written) to a connection whose
// receipt the gateway has not confirmed.
//
// A frame written to a socket may still be lost: the gateway can die before
// reading it or before committing it, or the connection can be half-open.
// Confirmation means the envelope is stored. It comes from the echo of a
// broadcast (the gateway echoes only after the commit), from seeing the
// envelope in history while resuming, or from the pinger finding in
// history the newest envelope written on the connection (the gateway
// handles a connection's frames in order and commits them in order, so
// every earlier one was stored with it or refused with an error). A pong
// alone confirms nothing: the gateway answers it once the earlier frames
// are read, before they are committed. After a reconnect, the entries
// still unconfirmed are looked up in history by id and sent again only if
// the gateway never stored them: no loss, no duplicate.
type outEntry struct {
	id       string
	frame    []byte
	n        uint64 // order of sending
	gen      int    // connection it was written to
	written  bool   // the write returned (successfully or not): the entry is the resume's to check
	checking bool   // a recheck (or its waiter, after a rate_limited refusal) owns it
	retries  int    // rate_limited resends
	// w, if set, is the sender waiting for the entry's fate (sendConfirmed):
	// it paces the resends after rate_limited itself, and hears how the
	// entry was settled.
	w *waiter
}

type outbox struct {
	entries map[string]*outEntry
	n       uint64
}

func newOutbox() outbox { return outbox{entries: map[string]*outEntry{}} }

func (o *outbox) add(id string, frame []byte, gen int, w *waiter) *outEntry {
	o.n++
	e := &outEntry{id: id, frame: frame, n: o.n, gen: gen, w: w}
	o.entries[id] = e
	if len(o.entries) > outboxMax {
		var oldest *outEntry
		for _, x := range o.entries {
			if oldest == nil || x.n < oldest.n {
				oldest = x
			}
		}
		o.settle(oldest.id, errForgotten)
	}
	return e
}

// errForgotten settles an entry the client stopped watching: its fate is
// not known.
var errForgotten = fmt.Errorf("%w: the client stopped watching it", ErrUnconfirmed)

// settle forgets entry id: err nil means the gateway stored it, else err
// says why it is no longer watched. A waiting sender hears which.
func (o *outbox) settle(id string, err error) {
	e := o.entries[id]
	if e == nil {
		return
	}
	delete(o.entries, id)
	if e.w != nil {
		e.w.settled(err)
	}
}

// written lists the entries written to connection gen, for a ping to
// confirm.
func (o *outbox) written(gen int) []*outEntry {
	var out []*outEntry
	for _, e := range o.entries {
		if e.gen == gen && e.written && !e.checking {
			out = append(out, e)
		}
	}
	return out
}

// older claims, in sending order, the entries written to connections
// before gen.
func (o *outbox) older(gen int) []*outEntry {
	var out []*outEntry
	for _, e := range o.entries {
		if e.gen < gen && e.written && !e.checking {
			e.checking = true
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out
}

// send writes e to the gateway, waiting (within ctx) for a connection if
// the client is between two. It returns once the frame is written, or once
// a failed write has left it for the next connection to check and, if the
// gateway never got it, send again.
func (c *Client) send(ctx context.Context, e *mcpx.Envelope) error {
	_, err := c.sendEntry(ctx, e, nil)
	return err
}

// sendEntry is send, with w (if not nil) waiting for the entry's fate. The
// entry is nil if the frame was not written; else it is in the outbox,
// whatever the error.
func (c *Client) sendEntry(ctx context.Context, e *mcpx.Envelope, w *waiter) (*outEntry, error) {
	frame := e.AppendJSON(nil)
	conn, gen, err := c.waitConn(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.lockWrite(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	entry := c.out.add(e.ID, frame, gen, w)
	c.mu.Unlock()
	werr := conn.Write(ctx, websocket.MessageText, frame)
	c.wrote(entry, gen)
	if werr != nil && ctx.Err() != nil {
		return entry, ctx.Err()
	}
	return entry, nil
}

// wrote records that the write of entry to connection gen returned, and
// releases the write lock.
func (c *Client) wrote(entry *outEntry, gen int) {
	c.mu.Lock()
	entry.written = true
	<-c.wlock
	// The resume of the next connection claims the entries written by
	// then, and checks them once history can answer. One that ran while
	// this write was under way did not see this entry: check it here,
	// whatever the write returned (a write into a dying socket often
	// succeeds). A failed write on the current connection is left to the
	// next resume: checking now, with the gateway away, could not tell.
	recheck := c.scanned > gen && !entry.checking && c.out.entries[entry.id] == entry
	if recheck {
		entry.checking = true
	}
	c.mu.Unlock()
	if recheck {
		c.goOwned(func() { c.recheck(entry, nil, 0) })
	}
}

// lockWrite takes the write lock (see Client.wlock), within ctx.
func (c *Client) lockWrite(ctx context.Context) error {
	select {
	case c.wlock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitConn returns the current connection, waiting for one.
func (c *Client) waitConn(ctx context.Context) (*websocket.Conn, int, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, 0, errConnClosed
		}
		conn, ready, gen := c.conn, c.ready, c.gen
		c.mu.Unlock()
		if conn != nil {
			return conn, gen, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-c.ctx.Done():
			return nil, 0, errConnClosed
		}
	}
}

// resendUnconfirmed re-checks, while resuming on conn (generation gen),
// every envelope written to an earlier connection that was never confirmed.
func (c *Client) resendUnconfirmed(conn *websocket.Conn, gen int) {
	c.mu.Lock()
	entries := c.out.older(gen)
	c.scanned = gen
	c.mu.Unlock()
	for _, e := range entries {
		c.recheck(e, conn, gen)
	}
}

// recheck looks e up in history by id and sends it again only if the
// gateway never stored it: on conn (generation gen) while resuming, else
// on whatever connection there is.
func (c *Client) recheck(e *outEntry, conn *websocket.Conn, gen int) {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	c.mu.Lock()
	tok, history := c.token, c.history
	c.mu.Unlock()
	if !history {
		c.warnOnce("no-history", "the gateway keeps no history: envelopes written just before a disconnect may have been lost")
		c.dropEntry(e, fmt.Errorf("%w: written just before a disconnect, and the gateway keeps no history to tell", ErrUnconfirmed))
		return
	}
	err := c.lookup(ctx, tok, e.id)
	var herr *HTTPError
	switch {
	case err == nil: // stored: it was published
		c.dropEntry(e, nil)
	case errors.As(err, &herr) && herr.Status == http.StatusBadRequest && herr.Code == mcpx.CodeUnknownCursor:
		c.log.Info("an envelope sent before the disconnect never reached the gateway; sending it again", "envelope", e.id)
		c.rewrite(ctx, e, conn, gen)
	default:
		// Sending again could duplicate a tool call; losing it is the
		// lesser harm, and the caller's timeout reports it.
		c.log.Warn("could not tell whether an envelope sent before the disconnect was published; not sending it again", "envelope", e.id, "err", err)
		c.dropEntry(e, fmt.Errorf("%w: written just before a disconnect, and history could not tell: %w", ErrUnconfirmed, err))
	}
}

// lookupAttempts bounds the history lookups of one recheck. A lookup that
// fails without an answer (the gateway restarting, a network blip) is tried
// again: giving up means not sending the envelope again, which loses it if
// the gateway never got it.
const lookupAttempts = 5

// lookup asks history whether the envelope id is stored: nil if it is, an
// HTTPError with CodeUnknownCursor if it is not.
func (c *Client) lookup(ctx context.Context, tok, id string) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, _, err := c.historyPage(ctx, tok, HistoryQuery{After: id, Limit: 1})
		var herr *HTTPError
		if err == nil || errors.As(err, &herr) || attempt == lookupAttempts {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait *= 2
	}
}

// rewrite writes an outbox entry the gateway does not hold again, on conn
// or (if nil) the current connection.
func (c *Client) rewrite(ctx context.Context, e *outEntry, conn *websocket.Conn, gen int) {
	if conn == nil {
		var err error
		if conn, gen, err = c.waitConn(ctx); err != nil {
			c.dropEntry(e, fmt.Errorf("%w: %w", ErrNotSent, err))
			return
		}
	}
	if err := c.lockWrite(ctx); err != nil {
		c.dropEntry(e, fmt.Errorf("%w: %w", ErrNotSent, err))
		return
	}
	c.mu.Lock()
	c.out.n++
	e.n, e.gen, e.written, e.checking = c.out.n, gen, false, false // its new place on the wire
	if e.w != nil {
		e.w.held = false
	}
	c.mu.Unlock()
	werr := conn.Write(ctx, websocket.MessageText, e.frame)
	c.wrote(e, gen)
	if werr != nil {
		c.log.Debug("resend failed; the next connection checks it again", "envelope", e.id, "err", werr)
	}
}

// dropEntry settles e (see outbox.settle) unless it was settled already.
func (c *Client) dropEntry(e *outEntry, err error) {
	c.mu.Lock()
	if c.out.entries[e.id] == e {
		c.out.settle(e.id, err)
	}
	c.mu.Unlock()
}

func (c *Client) warnOnce(key, msg string) {
	c.mu.Lock()
	seen := c.onceLog[key]
	c.onceLog[key] = true
	c.mu.Unlock()
	if !seen {
		c.log.Warn(msg)
	}
}

// pinger checks the connection's liveness and confirms the outbox. It
// returns when ctx ends or a ping fails (after closing conn, so that the
// read loop ends too).
func (c *Client) pinger(ctx context.Context, conn *websocket.Conn, gen int) {
	if c.opts.PingInterval < 0 {
		return
	}
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		mark := c.out.written(gen)
		c.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, c.opts.PingTimeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Info("gateway did not answer a ping; reconnecting", "timeout", c.opts.PingTimeout, "err", err)
				conn.CloseNow()
			}
			return
		}
		last, ok := c.stored(ctx, mark)
		if !ok {
			continue // they stay for the next round, or the next resume
		}
		c.mu.Lock()
		for _, e := range mark {
			// last found proves the others stored or refused: a
			// waiting sender must hear which, from the echo or the
			// refusal.
			if c.out.entries[e.id] == e && e.gen == gen && (e.w == nil || e == last) {
				c.out.settle(e.id, nil)
			}
		}
		c.mu.Unlock()
	}
}

// stored reports whether the entries in mark, all written to one
// connection, are stored or refused: whether history holds the last of
// them written, which it returns. Without history nothing can be checked,
// now or after a reconnect: they count as stored (last is nil), so that
// the outbox does not grow.
func (c *Client) stored(ctx context.Context, mark []*outEntry) (last *outEntry, ok bool) {
	if len(mark) == 0 {
		return nil, false
	}
	c.mu.Lock()
	tok, history := c.token, c.history
	c.mu.Unlock()
	if !history {
		return nil, true
	}
	last = mark[0]
	for _, e := range mark {
		if e.n > last.n {
			last = e
		}
	}
	lctx, cancel := context.WithTimeout(ctx, c.opts.PingTimeout)
	defer cancel()
	_, _, err := c.historyPage(lctx, tok, HistoryQuery{After: last.id, Limit: 1})
	return last, err == nil
}

// rateLimited sends an envelope the gateway refused for the rate limit
// again after the delay it asked for, or leaves that to its waiting sender;
// it reports false when the envelope is not ours to retry (unknown, or
// retried too often).
func (c *Client) rateLimited(id string, after time.Duration) bool {
	c.mu.Lock()
	e := c.out.entries[id]
	if e != nil && e.w != nil {
		// Its waiting sender sends it again (sendConfirmed); if a
		// recheck has claimed it, the recheck finds it missing from
		// history and sends it again.
		if !e.checking {
			e.checking = true
			e.w.hold(after)
		}
		c.mu.Unlock()
		return true
	}
	ok := e != nil && !e.checking && e.retries < maxRateRetries
	if ok {
		e.retries++
		e.checking = true
	}
	c.mu.Unlock()
	if !ok {
		return false
	}
	return c.goOwned(func() {
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-t.C:
			c.rewrite(c.ctx, e, nil, 0)
		case <-c.ctx.Done():
		}
	})
}
