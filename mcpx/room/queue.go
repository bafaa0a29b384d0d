package room

import (
	"bufio"
	"encoding/binary"
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

// frameConn is the hijacked connection under the websocket library. The
// library still reads, and writes its control frames (ping, pong, close)
// through Write. Data frames do not go through the library: the session's
// writer hands a whole batch of encoded envelopes to WriteFrames, which
// frames each one (RFC 6455 §5.2: a server's frames are unmasked, and
// compression is off, so a text frame is a 2-10 byte header and the
// payload) and sends the batch in one write(2).
//
// Why: through the library each message costs a frame-mutex round trip and
// two hand-offs to its timeout goroutine, and its own write(2). Those, not
// the envelope, were most of a delivery's CPU time. Both paths hold mu for
// a whole frame or batch, so frames never interleave.
//
// Every socket write has a deadline, so a peer that stops reading fails the
// write instead of holding the writer forever.
type frameConn struct {
	net.Conn
	writeTimeout time.Duration

	mu  sync.Mutex
	buf []byte
}

// maxRetainedBatch bounds the buffer an idle connection keeps between
// batches.
const maxRetainedBatch = 64 << 10

func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(p)
}

func (c *frameConn) writeLocked(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	return c.Conn.Write(p)
}

// WriteFrames sends each of frames as one text message, in one write.
func (c *frameConn) WriteFrames(frames [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := c.buf[:0]
	for _, f := range frames {
		buf = appendTextFrame(buf, f)
	}
	_, err := c.writeLocked(buf)
	if cap(buf) > maxRetainedBatch {
		buf = nil
	}
	c.buf = buf
	return err
}

// appendTextFrame appends a final, unmasked text frame carrying p.
func appendTextFrame(buf, p []byte) []byte {
	const finText = 0x81 // FIN bit, opcode 1 (text)
	switch n := len(p); {
	case n <= 125:
		buf = append(buf, finText, byte(n))
	case n <= 0xffff:
		buf = append(buf, finText, 126, byte(n>>8), byte(n))
	default:
		buf = append(buf, finText, 127)
		buf = binary.BigEndian.AppendUint64(buf, uint64(n))
	}
	return append(buf, p...)
}

// hijackWriter hands the websocket library a frameConn when it hijacks the
// HTTP connection.
type hijackWriter struct {
	http.ResponseWriter
	writeTimeout time.Duration
	conn         *frameConn // set by Hijack
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	raw, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		raw.Close()
		return nil, nil, err
	}
	w.conn = &frameConn{Conn: raw, writeTimeout: w.writeTimeout}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
