package relay

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errSlowConsumer closes a connection whose reader fell too far behind.
var errSlowConsumer = errors.New("slow consumer: outbound queue full")

// outbox is the bounded queue of frames waiting to be written to one
// connection. Broadcasts never wait on it: a subscriber that stops reading
// fills its outbox and is dropped, and nobody else notices. The connection's
// own answers (stored events for its REQ) wait for room instead, so a large
// query is paced by the client, not refused.
type outbox struct {
	limit int

	mu     sync.Mutex
	frames [][]byte
	bytes  int
	err    error         // sticky: set when the connection is done
	wake   chan struct{} // 1-buffered: frames were added
	room   chan struct{} // closed (and replaced) each time the writer drains
}

func newOutbox(limit int) *outbox {
	return &outbox{limit: limit, wake: make(chan struct{}, 1), room: make(chan struct{})}
}

// push queues frame. With wait, it waits up to stall for room; without, a
// full queue fails at once with errSlowConsumer.
func (o *outbox) push(frame []byte, wait bool, stall time.Duration) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	o.mu.Lock()
	for o.err == nil && o.bytes > 0 && o.bytes+len(frame) > o.limit {
		if !wait {
			o.mu.Unlock()
			return errSlowConsumer
		}
		room := o.room
		o.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(stall)
		}
		select {
		case <-room:
		case <-timer.C:
			return errSlowConsumer
		}
		o.mu.Lock()
	}
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	o.frames = append(o.frames, frame)
	o.bytes += len(frame)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// take waits for frames and returns them all, or the error that ended the
// outbox once it is empty.
func (o *outbox) take(ctx context.Context) ([][]byte, error) {
	for {
		o.mu.Lock()
		if len(o.frames) > 0 {
			frames := o.frames
			o.frames, o.bytes = nil, 0
			close(o.room)
			o.room = make(chan struct{})
			o.mu.Unlock()
			return frames, nil
		}
		err := o.err
		o.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-o.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// close ends the outbox: pushes fail with err, and take returns err once
// what is queued has been taken.
func (o *outbox) close(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}
