package relay

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// errSlowConsumer is the write error a connection sees once its reader has
// fallen so far behind that it was dropped.
var errSlowConsumer = errors.New("relay: slow consumer: outbound queue full")

// khatru writes every broadcast synchronously, under a per-connection mutex,
// from the goroutine of the client that published the event. A subscriber that
// stops reading fills its TCP window, the write blocks with no deadline, and
// the publisher (and every subscriber after the stalled one) waits forever.
//
// queuedConn fixes that below khatru, at the net.Conn it hijacks: Write only
// appends to a bounded in-memory queue, and one goroutine per connection drains
// the queue to the socket with a write deadline. A writer that finds the queue
// over its limit waits at most stallTimeout for it to drain and then drops the
// connection, so a stalled reader can delay others once, briefly, and is then
// gone. Bytes are queued in order, so websocket framing is untouched.
type queuedConn struct {
	net.Conn

	limit        int           // bytes queued before writers must wait
	stallTimeout time.Duration // how long a writer waits for room before dropping the connection
	writeTimeout time.Duration // deadline for each socket write
	onDrop       func()        // called once if the connection is dropped as a slow consumer
	onClose      func()        // called once when the socket is closed, for whatever reason

	mu      sync.Mutex
	pending []byte        // bytes accepted by Write, not yet handed to the socket
	wake    chan struct{} // 1-buffered: signals the drain goroutine that pending grew or closing began
	drained chan struct{} // closed and replaced each time the drain goroutine takes pending
	err     error         // sticky: once set, every Write fails
	closing bool
	done    chan struct{} // closed when the drain goroutine exits
}

func newQueuedConn(c net.Conn, limit int, stallTimeout, writeTimeout time.Duration, onDrop, onClose func()) *queuedConn {
	q := &queuedConn{
		Conn:         c,
		limit:        limit,
		stallTimeout: stallTimeout,
		writeTimeout: writeTimeout,
		onDrop:       onDrop,
		onClose:      onClose,
		wake:         make(chan struct{}, 1),
		drained:      make(chan struct{}),
		done:         make(chan struct{}),
	}
	go q.drain()
	return q
}

func (q *queuedConn) Write(p []byte) (int, error) {
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	q.mu.Lock()
	for q.err == nil && len(q.pending) > 0 && len(q.pending)+len(p) > q.limit {
		drained := q.drained
		q.mu.Unlock()
		if deadline == nil {
			deadline = time.NewTimer(q.stallTimeout)
		}
		select {
		case <-drained:
			q.mu.Lock()
		case <-deadline.C:
			q.fail(errSlowConsumer)
			return 0, errSlowConsumer
		}
	}
	if q.err != nil {
		err := q.err
		q.mu.Unlock()
		return 0, err
	}
	q.pending = append(q.pending, p...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// SetWriteDeadline is a no-op: writes into the queue never block on the
// network, and the drain goroutine applies its own deadline.
func (q *queuedConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline applies only to reads, for the same reason.
func (q *queuedConn) SetDeadline(t time.Time) error { return q.Conn.SetReadDeadline(t) }

// Close flushes what is queued (bounded by the write timeout) and closes the
// socket. It is safe to call more than once and from any goroutine.
func (q *queuedConn) Close() error {
	q.mu.Lock()
	q.closing = true
	if q.err == nil {
		q.err = net.ErrClosed
	}
	q.mu.Unlock()
	// Bound a flush already in progress, too.
	q.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
	return nil
}

// closeFlushTimeout bounds how long Close spends handing queued bytes (often
// a websocket close frame) to a peer that may no longer be reading.
const closeFlushTimeout = time.Second

// fail records err, drops the socket and wakes everyone waiting.
func (q *queuedConn) fail(err error) {
	q.mu.Lock()
	first := q.err == nil
	if first {
		q.err = err
	}
	q.closing = true
	q.mu.Unlock()
	if first && errors.Is(err, errSlowConsumer) && q.onDrop != nil {
		q.onDrop()
	}
	// Closing the socket unblocks both a drain stuck in Write and khatru's
	// read loop, which then tears the websocket down.
	q.Conn.Close()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queuedConn) drain() {
	defer close(q.done)
	defer func() {
		q.Conn.Close()
		if q.onClose != nil {
			q.onClose()
		}
	}()
	var spare []byte
	for range q.wake {
		for {
			q.mu.Lock()
			buf, closing, err := q.pending, q.closing, q.err
			if len(buf) > 0 {
				// Swap buffers: Write appends to the spare while the socket
				// takes buf. pending and spare never share an array.
				q.pending = spare[:0]
			}
			close(q.drained)
			q.drained = make(chan struct{})
			q.mu.Unlock()
			if len(buf) == 0 {
				if closing {
					return
				}
				break
			}
			if err != nil && !errors.Is(err, net.ErrClosed) {
				return // dropped: do not try to flush to a dead peer
			}
			timeout := q.writeTimeout
			if closing && timeout > closeFlushTimeout {
				timeout = closeFlushTimeout
			}
			q.Conn.SetWriteDeadline(time.Now().Add(timeout))
			if _, werr := q.Conn.Write(buf); werr != nil {
				q.fail(werr)
				return
			}
			// Keep the buffer for reuse unless a burst made it large: an idle
			// connection should not pin megabytes.
			if cap(buf) <= maxRetainedBuffer {
				spare = buf
			} else {
				spare = nil
			}
		}
	}
}

// maxRetainedBuffer is the largest drained buffer a connection keeps for reuse.
const maxRetainedBuffer = 64 << 10

// queuingWriter wraps an http.ResponseWriter so that the connection khatru
// hijacks for a websocket is a queuedConn registered with the relay.
type queuingWriter struct {
	http.ResponseWriter
	hijack func(net.Conn) net.Conn
}

func (w queuingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return w.hijack(c), brw, nil
}

func (w queuingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
