package nwc

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// responses is a Client's one subscription to its wallet's responses,
// opened at its first request and shared by all: a request then costs a
// publish, not a subscription's round trip to the relays before it (which
// was two of the seven relay hops of a paid call on the critical path:
// the server's make_invoice and the client's pay_invoice). The reader
// hands each response to the request its e tag names. It is owned by the
// Client: Close ends it.
type responses struct {
	start sync.Mutex // held while the subscription is being opened

	mu      sync.Mutex
	running bool
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the reader ends; nil before it starts
	waiting map[nostr.ID]chan nostr.Event
}

// await registers the request id for its responses, and makes sure the
// subscription that hears them is open (confirmed by a relay) before the
// request is published. end unregisters it.
func (c *Client) await(ctx context.Context, id nostr.ID) (answers <-chan nostr.Event, end func(), err error) {
	if err := c.openResponses(ctx); err != nil {
		return nil, nil, err
	}
	r := &c.resp
	ch := make(chan nostr.Event, 4)
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = make(map[nostr.ID]chan nostr.Event)
	}
	r.waiting[id] = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		if r.waiting[id] == ch {
			delete(r.waiting, id)
		}
		r.mu.Unlock()
	}, nil
}

func (c *Client) openResponses(ctx context.Context) error {
	r := &c.resp
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running {
		return nil
	}
	r.start.Lock()
	defer r.start.Unlock()
	r.mu.Lock()
	if r.stop == nil {
		r.stop = make(chan struct{})
	}
	running, stop := r.running, r.stop
	r.mu.Unlock()
	switch {
	case isClosed(stop):
		return errClosed
	case running:
		return nil
	}
	sub := c.pool.Subscribe(nostr.Filter{
		Kinds:   []nostr.Kind{KindResponse},
		Authors: []nostr.PubKey{c.uri.Wallet},
		Tags:    nostr.TagMap{"p": {c.keys.pub.Hex()}},
	}, 0)
	select {
	case <-sub.Ready():
	case <-stop:
		sub.Close()
		return errClosed
	case <-ctx.Done():
		sub.Close()
		return fmt.Errorf("nwc: %w: no relay of %s answered the subscription: %w", ErrNoAnswer, strings.Join(c.uri.Relays, ", "), context.Cause(ctx))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if isClosed(stop) {
		sub.Close()
		return errClosed
	}
	r.running, r.done = true, make(chan struct{})
	go c.readResponses(sub, stop, r.done)
	return nil
}

// readResponses reads the subscription until the client closes or the
// subscription does (its pool closed); then the next request opens
// another.
func (c *Client) readResponses(sub *nostrx.Subscription, stop, done chan struct{}) {
	r := &c.resp
	defer close(done)
	defer sub.Close()
	defer func() {
		r.mu.Lock()
		r.running = false
		for id, ch := range r.waiting {
			close(ch) // their requests are told: no answer will come this way
			delete(r.waiting, id)
		}
		r.mu.Unlock()
	}()
	for {
		select {
		case evt, ok := <-sub.Events():
			if !ok {
				return
			}
			ref := evt.Tags.Find("e")
			var ch chan nostr.Event
			if len(ref) >= 2 {
				if id, err := nostr.IDFromHex(ref[1]); err == nil {
					r.mu.Lock()
					ch = r.waiting[id]
					r.mu.Unlock()
				}
			}
			if ch == nil {
				c.log.Debug("nwc: response to no request in flight ignored", "id", evt.ID.Hex())
				continue
			}
			select {
			case ch <- evt:
			default:
				c.log.Info("nwc: a request's responses overflowed; one ignored", "id", evt.ID.Hex())
			}
		case <-stop:
			return
		}
	}
}

func (r *responses) close() {
	r.mu.Lock()
	if r.stop == nil {
		r.stop = make(chan struct{})
	}
	if !isClosed(r.stop) {
		close(r.stop)
	}
	done := r.done
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}
