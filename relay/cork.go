package relay

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// corkConn lets the writer of a connection send a batch of websocket
// messages in one system call: the websocket library flushes every message
// to the socket, and a subscriber that falls a little behind would otherwise
// cost one write per event. Between cork and uncork, writes collect in a
// buffer; outside, they pass straight through.
type corkConn struct {
	net.Conn

	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what collected, within timeout, and lets writes through again.
func (c *corkConn) uncork(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err := c.Conn.Write(c.buf)
	c.Conn.SetWriteDeadline(time.Time{})
	if cap(c.buf) > 256<<10 {
		c.buf = nil // do not pin a burst's worth of memory
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// corkingWriter hands the websocket library a corkConn when it hijacks the
// HTTP connection.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: c}
	// The library writes through the buffered writer it is given, not the
	// net.Conn: give it one over the corkConn. Bytes the client sent early
	// are still in brw.Reader, which stays.
	brw.Writer = bufio.NewWriterSize(w.conn, brw.Writer.Size())
	return w.conn, brw, nil
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
