package participant

import (
	"context"
	"fmt"
	"time"

	"github.com/cvmgo/cvm/mcpx"
)

// waiter is a sender waiting for its envelope's fate (sendConfirmed). Its
// fields other than the channels are guarded by Client.mu.
type waiter struct {
	done chan struct{} // closed once the entry is settled
	err  error         // how: nil if stored; set before done closes
	// retry hears a rate_limited refusal: the delay the gateway asked for
	// before the envelope is sent again. One at most is pending: the
	// envelope is not on the wire again until the waiter sends it.
	retry chan time.Duration
	// held is set from a rate_limited refusal until the waiter sends the
	// envelope again: meanwhile the gateway does not have it.
	held bool
}

func newWaiter() *waiter {
	return &waiter{done: make(chan struct{}), retry: make(chan time.Duration, 1)}
}

// settled reports the entry's fate, once (the outbox forgets the entry).
func (w *waiter) settled(err error) {
	w.err = err
	close(w.done)
}

// hold passes on a rate_limited refusal, with the delay asked for.
func (w *waiter) hold(after time.Duration) {
	w.held = true
	select {
	case w.retry <- after:
	default:
	}
}

// sendConfirmed sends e and waits until the gateway stored it (its echo, or
// history) or refused it. A rate_limited refusal is waited out and e sent
// again, as often as ctx allows, so that envelopes sent one after another
// this way are published in that order, none lost. See SayConfirmed for
// the errors.
func (c *Client) sendConfirmed(ctx context.Context, e *mcpx.Envelope) error {
	w := newWaiter()
	entry, err := c.sendEntry(ctx, e, w)
	if entry == nil {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	if err != nil {
		return c.abandon(entry, w, err)
	}
	for {
		select {
		case <-w.done:
			return w.err
		case after := <-w.retry:
			t := time.NewTimer(after)
			select {
			case <-t.C:
				c.rewrite(ctx, entry, nil, 0)
			case <-ctx.Done():
				t.Stop()
				return c.abandon(entry, w, ctx.Err())
			case <-c.ctx.Done():
				t.Stop()
				return c.abandon(entry, w, errConnClosed)
			}
		case <-ctx.Done():
			return c.abandon(entry, w, ctx.Err())
		case <-c.ctx.Done():
			return c.abandon(entry, w, errConnClosed)
		}
	}
}

// abandon stops waiting for entry because of why. An entry held after a
// rate_limited refusal is forgotten: the gateway does not have it, and
// nobody will send it. One on the wire is left to the outbox's ordinary
// care (its echo, the pinger, the next resume): it may yet be published.
func (c *Client) abandon(entry *outEntry, w *waiter, why error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-w.done:
		return w.err // settled meanwhile: that is the answer
	default:
	}
	if w.held {
		c.out.settle(entry.id, fmt.Errorf("%w: %w", ErrNotSent, why))
		return w.err
	}
	entry.w = nil
	return fmt.Errorf("%w: %w", ErrUnconfirmed, why)
}
