package mcpx

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// outQueue is a connection's bounded send queue. Fan-out pushes frames and
// never blocks; the connection's writer goroutine takes them in batches. A
// push that would exceed either bound fails, and the caller drops the
// connection as a slow consumer: one participant that stops reading must
// never stall a topic.
type outQueue struct {
	maxFrames int
	maxBytes  int

	mu     sync.Mutex
	frames [][]byte
	bytes  int
	closed bool
	wake   chan struct{} // 1-buffered: a push happened since the last take
}

func newOutQueue(maxFrames, maxBytes int) *outQueue {
	return &outQueue{maxFrames: maxFrames, maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// push queues f and reports whether it fit. After close it reports true
// and drops f: the connection is going away and its reader will say so.
func (q *outQueue) push(f []byte) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return true
	}
	if len(q.frames) >= q.maxFrames || (q.bytes+len(f) > q.maxBytes && len(q.frames) > 0) {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, f)
	q.bytes += len(f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take moves every queued frame to dst (which it returns, reused).
func (q *outQueue) take(dst [][]byte) [][]byte {
	q.mu.Lock()
	dst = append(dst[:0], q.frames...)
	clear(q.frames)
	q.frames = q.frames[:0]
	q.bytes = 0
	q.mu.Unlock()
	return dst
}

// close stops accepting frames.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// corkConn sits under the websocket library, on the hijacked connection.
// While corked, writes collect in memory; uncork sends them in one system
// call. The writer goroutine corks around each batch it takes from the
// queue, so a burst of N envelopes to one participant costs one write(2),
// not N: the syscall is most of what a delivery costs. Writes while
// uncorked (pings, pongs, close frames) go straight through.
//
// Every socket write has a deadline, so a peer that stops reading fails the
// write instead of holding the writer forever.
type corkConn struct {
	net.Conn
	writeTimeout time.Duration

	mu     sync.Mutex
	corked bool
	buf    []byte
}

// maxRetainedCork bounds the buffer an idle connection keeps between batches.
const maxRetainedCork = 64 << 10

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.writeLocked(p)
}

func (c *corkConn) writeLocked(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork sends what collected while corked.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.writeLocked(c.buf)
	if cap(c.buf) > maxRetainedCork {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// corkingWriter hands the websocket library a corkConn when it hijacks the
// HTTP connection.
type corkingWriter struct {
	http.ResponseWriter
	writeTimeout time.Duration
	conn         *corkConn // set by Hijack
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	raw, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		raw.Close()
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: raw, writeTimeout: w.writeTimeout}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
