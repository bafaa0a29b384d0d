package contextvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// relayPool is what an endpoint uses of a *nostrx.Pool. Tests put a pool
// without relays, or one that only records what is published, in its
// place.
type relayPool interface {
	Publish(ctx context.Context, evt nostr.Event) error
	SubscribeFilters(filters []nostr.Filter, buffer int) *nostrx.Subscription
	Query(ctx context.Context, filter nostr.Filter) ([]nostr.Event, error)
	Relays() []string
	Close() error
}

// endpoint is what a client and a server share: an identity and a relay pool
// to publish through.
type endpoint struct {
	pool     relayPool
	signer   Signer
	me       nostr.PubKey
	log      *slog.Logger
	maxEvent int // largest event published; 0 means DefaultMaxEventBytes
}

// DefaultMaxEventBytes is the largest event published by default: relays
// commonly refuse messages above 128 KiB, and a refusal is better found out
// here, with an error the caller can read, than by a dropped connection.
const DefaultMaxEventBytes = 128 << 10

// seal signs a KindMessage event for recipient and wraps it when wrapKind is
// not 0. It returns the message event (whose id answers reference) and the
// event to publish, which it checks against the size limit.
func (e *endpoint) seal(ctx context.Context, recipient nostr.PubKey, content string, tags nostr.Tags, wrapKind nostr.Kind) (msg, out nostr.Event, err error) {
	msg, err = newMessageEvent(ctx, e.signer, content, tags)
	if err != nil {
		return msg, msg, err
	}
	out = msg
	if wrapKind != 0 {
		if out, err = Wrap(msg, recipient, wrapKind); err != nil {
			return msg, out, err
		}
	}
	limit := e.maxEvent
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	if n := len(out.String()); n > limit {
		return msg, out, fmt.Errorf("%w: the event would be %d bytes, the limit is %d", ErrTooLarge, n, limit)
	}
	return msg, out, nil
}

// send signs a KindMessage event for recipient and publishes it, inside a
// gift wrap of wrapKind unless wrapKind is 0. It returns the signed message
// event, whose id is what the answer will reference, even when publishing
// fails, so that the caller can still correlate or report.
func (e *endpoint) send(ctx context.Context, recipient nostr.PubKey, content string, tags nostr.Tags, wrapKind nostr.Kind) (nostr.Event, error) {
	evt, out, err := e.seal(ctx, recipient, content, tags, wrapKind)
	if err != nil {
		return evt, err
	}
	if err := e.pool.Publish(ctx, out); err != nil {
		return evt, fmt.Errorf("publish: %w", err)
	}
	return evt, nil
}

// unheardRetries are the pauses before re-publishing an answer that no relay
// had a listener for. The peer just wrote to us, so it is about to listen:
// the reference TypeScript client publishes its request before its own
// subscription is live on the relay, and an answer faster than the relay's
// REQ processing is otherwise lost. About 0.8 s in all.
var unheardRetries = []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}

// reply is send for an answer to a peer that has just written to us: an
// unheard publish is retried for a short while instead of given up.
func (e *endpoint) reply(ctx context.Context, recipient nostr.PubKey, content string, tags nostr.Tags, wrapKind nostr.Kind) (nostr.Event, error) {
	evt, out, err := e.seal(ctx, recipient, content, tags, wrapKind)
	if err != nil {
		return evt, err
	}
	for _, pause := range append(unheardRetries, 0) {
		err = e.pool.Publish(ctx, out)
		if !errors.Is(err, nostrx.ErrUnheard) || pause == 0 {
			break
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return evt, fmt.Errorf("publish: %w", err)
		}
	}
	if err != nil {
		return evt, fmt.Errorf("publish: %w", err)
	}
	return evt, nil
}

// open turns an event delivered by the pool into the message event it
// carries: gift wraps are unwrapped and checked, plain messages are checked
// to be addressed to us. wrapKind is the gift-wrap kind, 0 for plaintext.
func (e *endpoint) open(ctx context.Context, evt nostr.Event) (inner nostr.Event, wrapKind nostr.Kind, err error) {
	switch evt.Kind {
	case KindGiftWrap, KindEphemeralGiftWrap:
		inner, err = Unwrap(ctx, e.signer, e.me, evt)
		return inner, evt.Kind, err
	case KindMessage:
		if !hasPTag(evt.Tags, e.me) {
			return evt, 0, ErrNotAddressed
		}
		return evt, 0, nil
	default:
		return evt, 0, fmt.Errorf("unexpected kind %d", evt.Kind)
	}
}
