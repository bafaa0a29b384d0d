package wsconn

import (
	"context"
	"errors"
	"io"

	"github.com/coder/websocket"
)

// Errors of ReadMessage for a message over the limits (Options.ReadLimit,
// Options.CloseLimit). They are told apart by what was read, never by the
// library's error text.
var (
	// ErrMessageTooBig: the message was larger than the connection reads
	// at all. The connection has been closed with 1009 (message too big)
	// and is ending.
	ErrMessageTooBig = errors.New("websocket message too big")
	// ErrMessageDiscarded: the message was larger than ReadLimit but not
	// than CloseLimit. It was read to its end and dropped; the connection
	// is still open.
	ErrMessageDiscarded = errors.New("websocket message over the read limit discarded")
)

// maxRetainedRead bounds the buffer ReadMessage keeps between messages:
// one large message should not pin its buffer.
const maxRetainedRead = 64 << 10

// minReadBuffer is where a read buffer starts: most messages fit.
const minReadBuffer = 512

// ReadMessage reads the next data message. The bytes it returns are valid
// until the next call. One goroutine at a time may call it; the library
// answers pings and handles close frames while it runs.
//
// A message over the limits gives ErrMessageDiscarded or ErrMessageTooBig
// (see Options.ReadLimit). Other errors are the library's: the peer's close
// (websocket.CloseStatus), the connection closing, ctx ending (which
// closes the connection).
func (c *Conn) ReadMessage(ctx context.Context) (websocket.MessageType, []byte, error) {
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	soft, hard := c.opts.ReadLimit, max(c.opts.ReadLimit, c.opts.CloseLimit)
	buf, err := readLimited(r, c.rbuf[:0], soft, hard, c.sock.closeData)
	if cap(buf) <= maxRetainedRead {
		c.rbuf = buf[:0]
	} else {
		c.rbuf = nil
	}
	if errors.Is(err, ErrMessageTooBig) {
		c.setEnd(ending{kind: endTooBig, cause: ErrMessageTooBig})
	}
	return typ, buf, err
}

// readLimited reads one message from r into buf and returns it. soft <= 0
// reads it whole, however large. Otherwise a message over soft bytes is
// read on, into buf's space, and dropped: ErrMessageDiscarded at its end
// if it stays within hard (>= soft) bytes, ErrMessageTooBig as soon as it
// passes hard. It never reads more than hard+1 bytes of a message.
//
// Before it reports ErrMessageTooBig it calls overHard, then reads once
// more: the websocket library, whose read limit Accept set to hard, fails
// that read and sends its 1009 close frame from this goroutine, before
// ReadMessage returns. overHard makes sure no data frame follows that
// frame.
func readLimited(r io.Reader, buf []byte, soft, hard int64, overHard func()) ([]byte, error) {
	var n int64 // bytes of the message read so far
	for {
		if soft > 0 && n > hard {
			overHard()
			var one [1]byte
			r.Read(one[:])
			return buf[:0], ErrMessageTooBig
		}
		discarding := soft > 0 && n > soft
		switch {
		case cap(buf) < minReadBuffer:
			buf = append(make([]byte, 0, minReadBuffer), buf...)
		case len(buf) == cap(buf) && !discarding:
			buf = append(buf, 0)[:len(buf)]
		}
		p := buf[len(buf):cap(buf)]
		if discarding {
			p = buf[:cap(buf)] // what is there is dropped anyway
		}
		if soft > 0 && int64(len(p)) > hard+1-n {
			p = p[:hard+1-n]
		}
		k, err := r.Read(p)
		n += int64(k)
		if !discarding {
			buf = buf[:len(buf)+k]
			if soft > 0 && n > soft {
				buf = buf[:0]
			}
		}
		switch {
		case soft > 0 && n > hard:
			// Too big, whatever the read said: see the top of the loop.
		case err == io.EOF && soft > 0 && n > soft:
			return buf[:0], ErrMessageDiscarded
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf[:0], err
		}
	}
}
