package wsconn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// sock is the hijacked connection under the websocket library. Two parties
// write to it:
//
//   - the library, through Write: its control frames (pong, ping, close),
//     each flushed whole from its buffered writer;
//   - the Conn's writer goroutine, through writeFrames: a batch of data
//     messages it framed itself.
//
// Both hold wmu for a whole frame or batch, so a control frame never lands
// inside a data frame. Every write has a deadline, so a peer that stops
// reading fails the write instead of holding the writer forever.
type sock struct {
	net.Conn
	timeout time.Duration // of each write; 0: none

	wmu    sync.Mutex
	buf    []byte // the batch being framed
	torn   bool   // a write failed part way: the stream ends inside a frame
	noData bool   // the library sent a close frame: no data may follow

	dmu     sync.Mutex // orders deadline changes with stop
	stopped bool       // writes fail: the connection is ending
}

// maxRetainedBatch bounds the framing buffer an idle connection keeps
// between batches.
const maxRetainedBatch = 64 << 10

// aLongTimeAgo is a write deadline that fails a write in progress at once.
var aLongTimeAgo = time.Unix(1, 0)

// Write is the library's path to the socket.
func (s *sock) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeLocked(p)
}

func (s *sock) writeLocked(p []byte) (int, error) {
	if err := s.arm(); err != nil {
		return 0, err
	}
	n, err := s.Conn.Write(p)
	if err != nil && n > 0 && n < len(p) {
		s.torn = true
	}
	return n, err
}

// arm sets the deadline of the next write, unless the socket is stopped.
func (s *sock) arm() error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.stopped {
		return net.ErrClosed
	}
	if s.timeout > 0 {
		s.Conn.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	return nil
}

// stop fails the write in progress, if any, and every later one except
// writeCloseFrame's. It never blocks on a write.
func (s *sock) stop() {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.stopped = true
	s.Conn.SetWriteDeadline(aLongTimeAgo)
}

// writeFrames sends each of frames as one text message, in one write.
func (s *sock) writeFrames(frames [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.noData {
		return errNoData
	}
	buf := s.buf[:0]
	for _, f := range frames {
		buf = appendTextFrame(buf, f)
	}
	_, err := s.writeLocked(buf)
	if cap(buf) > maxRetainedBatch {
		buf = nil // do not pin a burst's worth of memory
	}
	s.buf = buf
	return err
}

// errNoData: a batch was refused because the library is closing the
// connection.
var errNoData = errors.New("no data after a close frame")

// closeData makes writeFrames fail from now on, after the batch in flight:
// the library is about to send a close frame, which no data may follow.
func (s *sock) closeData() {
	s.wmu.Lock()
	s.noData = true
	s.wmu.Unlock()
}

// writeCloseFrame sends a close frame, stopped or not, within timeout,
// unless the stream ends inside a frame, and reports whether it was sent.
// It is best effort, for a peer that may not be reading; the connection is
// closed right after.
func (s *sock) writeCloseFrame(code websocket.StatusCode, reason string, timeout time.Duration) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.torn || s.noData {
		return false
	}
	s.dmu.Lock()
	s.Conn.SetWriteDeadline(time.Now().Add(timeout))
	s.dmu.Unlock()
	f := appendCloseFrame(nil, code, reason)
	n, err := s.Conn.Write(f)
	return err == nil && n == len(f)
}

// reset closes the socket abortively: the kernel discards what it still
// holds for the peer and sends RST, instead of trickling megabytes to a
// peer that reads slowly, long after the connection was given up on.
func (s *sock) reset() {
	if tc, ok := s.Conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	s.Conn.Close()
}

// appendTextFrame appends a final, unmasked text frame carrying p (RFC 6455
// §5.2: a server's frames are unmasked, and compression is off, so a frame
// is a 2 to 10 byte header and the payload).
func appendTextFrame(buf, p []byte) []byte {
	const finText = 0x81 // FIN, opcode 1 (text)
	return append(appendHeader(buf, finText, len(p)), p...)
}

// appendCloseFrame appends a close frame with code and reason, the reason
// cut to the 123 bytes a control frame has room for.
func appendCloseFrame(buf []byte, code websocket.StatusCode, reason string) []byte {
	const finClose = 0x88 // FIN, opcode 8 (close)
	reason = reason[:min(len(reason), 123)]
	buf = appendHeader(buf, finClose, 2+len(reason))
	buf = binary.BigEndian.AppendUint16(buf, uint16(code))
	return append(buf, reason...)
}

func appendHeader(buf []byte, first byte, n int) []byte {
	switch {
	case n <= 125:
		return append(buf, first, byte(n))
	case n <= 0xffff:
		return append(buf, first, 126, byte(n>>8), byte(n))
	default:
		buf = append(buf, first, 127)
		return binary.BigEndian.AppendUint64(buf, uint64(n))
	}
}

// hijackWriter hands the websocket library a sock when it hijacks the HTTP
// connection.
type hijackWriter struct {
	http.ResponseWriter
	timeout time.Duration
	sock    *sock // set by Hijack
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
	w.sock = &sock{Conn: raw, timeout: w.timeout}
	// The library writes through the buffered writer it is given, not the
	// net.Conn: point it at the sock. Bytes the client sent early are
	// still in brw.Reader, which stays.
	brw.Writer.Reset(w.sock)
	return w.sock, brw, nil
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
