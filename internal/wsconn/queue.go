package wsconn

import (
	"errors"
	"sync"
	"time"
)

// Results of a push other than success. Conn turns them into its exported
// errors; the queue itself drops nobody.
var (
	errFull   = errors.New("queue full")
	errClosed = errors.New("queue closed")
)

// queue is a connection's bounded queue of encoded messages. Any number of
// goroutines push; one, the writer, takes everything queued at once.
//
// Room is made when the writer takes a batch, not when the batch reaches the
// socket: a connection holds at most one full queue plus the batch being
// written.
type queue struct {
	maxFrames int // 0: no bound on the count
	maxBytes  int // 0: no bound on the bytes

	mu     sync.Mutex
	frames [][]byte
	bytes  int
	closed bool
	wake   chan struct{} // 1-buffered: frames were added since the last take
	room   chan struct{} // nil unless a pusher waits; closed by take and close
}

func newQueue(maxFrames, maxBytes int) *queue {
	return &queue{maxFrames: maxFrames, maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// fullLocked reports whether f does not fit. A frame larger than maxBytes
// still fits an empty queue: the bound is on a backlog, not on one message.
func (q *queue) fullLocked(f []byte) bool {
	if q.maxFrames > 0 && len(q.frames) >= q.maxFrames {
		return true
	}
	return q.maxBytes > 0 && len(q.frames) > 0 && q.bytes+len(f) > q.maxBytes
}

// push queues f, or fails at once with errFull or errClosed.
func (q *queue) push(f []byte) error {
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return errClosed
	case q.fullLocked(f):
		q.mu.Unlock()
		return errFull
	}
	q.appendLocked(f)
	q.mu.Unlock()
	q.signal()
	return nil
}

// pushWait queues f, waiting up to wait for the writer to make room. It
// fails with errFull if none was made in time, errClosed if the queue closed
// first.
func (q *queue) pushWait(f []byte, wait time.Duration) error {
	var timer *time.Timer
	q.mu.Lock()
	for !q.closed && q.fullLocked(f) {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-room:
		case <-timer.C:
			return errFull
		}
		q.mu.Lock()
	}
	if q.closed {
		q.mu.Unlock()
		return errClosed
	}
	q.appendLocked(f)
	q.mu.Unlock()
	q.signal()
	return nil
}

func (q *queue) appendLocked(f []byte) {
	q.frames = append(q.frames, f)
	q.bytes += len(f)
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take moves every queued frame to dst, which it returns (reused across
// calls by the writer). It takes frames queued before close too: an orderly
// close flushes them.
func (q *queue) take(dst [][]byte) [][]byte {
	q.mu.Lock()
	dst = append(dst[:0], q.frames...)
	clear(q.frames)
	q.frames = q.frames[:0]
	q.bytes = 0
	q.freeRoomLocked()
	q.mu.Unlock()
	return dst
}

// freeRoomLocked wakes every pusher waiting for room.
func (q *queue) freeRoomLocked() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// close makes every push fail with errClosed, waiting pushers included. If
// discard is set, frames still queued are dropped; otherwise take still
// returns them.
func (q *queue) close(discard bool) {
	q.mu.Lock()
	q.closed = true
	if discard {
		clear(q.frames)
		q.frames, q.bytes = nil, 0
	}
	q.freeRoomLocked()
	q.mu.Unlock()
	q.signal()
}
