// Package wsconn serves the server side of a WebSocket connection whose
// data messages are written in batches by one writer goroutine, behind a
// bounded queue. The relay and the MCPx room gateway both fan one message
// out to many connections; this is their common connection.
//
// # Why the writer frames messages itself
//
// Writing each message through the websocket library
// (github.com/coder/websocket) costs a mutex round trip, two hand-offs to
// its timeout goroutine and a system call. Instead, Accept hands the
// library a hijacked connection that it still reads from, and through
// which it still writes its control frames, while the Conn's writer takes
// every queued message at once, frames the batch itself (a server's frames
// are unmasked and compression is off) and sends it in one write with a
// deadline. The writer yields once before taking a batch, so that a
// fan-out in progress fills it; on a saturated machine that yield can last
// a scheduling slice, which the queue's bounds must absorb.
//
// # Contract
//
// The goroutine that accepted a Conn owns it. It runs Run exactly once, in
// a goroutine of its own, and waits for it; Run returns after the socket
// is closed. It reads with ReadMessage from one goroutine at a time, and
// when reading ends it ends the connection (Close, CloseNow or Abort): a
// read error does not, and Run waits for an end.
//
// Push and PushWait may be called by any number of goroutines at once.
// Messages leave in the order their pushes returned: those of one goroutine
// in the order it pushed them. A control frame of the library (pong, ping,
// close) goes between two data frames, never inside one.
//
// The connection ends once, by whichever comes first:
//
//   - Close: orderly. Messages queued before it are written, then the close
//     handshake runs.
//   - CloseNow: the socket is closed (FIN) at once; queued messages are
//     dropped.
//   - Abort: the socket is reset (RST) at once; queued messages are dropped.
//   - the connection drops itself as a slow consumer: a Push over the
//     queue's bounds, a PushWait that found no room within
//     Options.MaxWait, or a write past Options.WriteTimeout. Queued
//     messages are dropped, a write in progress is cut short, and the
//     socket is reset, or sent Options.DropStatus and closed, as the
//     options say. The cause matches ErrSlowConsumer.
//   - a message over the limit that closes (see Options.ReadLimit): the
//     library sends 1009 (ErrMessageTooBig), no data message follows it,
//     and the close handshake runs.
//   - a write fails: the socket is closed.
//
// After the end, Push and PushWait fail with ErrClosed and drop the
// message. CloseNow and Abort still take effect on a connection that is
// still ending (a close handshake waits for the peer up to five seconds);
// Close after the end does nothing.
//
// Files: conn.go (Conn: Accept, Run, the pushes and the ends), queue.go
// (the bounded queue of messages), read.go (ReadMessage and its limits),
// sock.go (the hijacked socket both writers share, and framing).
package wsconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Errors a Conn reports. ErrQueueFull and ErrWriteTimeout match
// ErrSlowConsumer.
var (
	// ErrSlowConsumer: the connection was dropped because its peer does
	// not read fast enough.
	ErrSlowConsumer = errors.New("slow consumer")
	// ErrQueueFull: a push found the queue full (Push), or no room in it
	// within Options.MaxWait (PushWait).
	ErrQueueFull = fmt.Errorf("%w: send queue full", ErrSlowConsumer)
	// ErrWriteTimeout: a write to the socket took longer than
	// Options.WriteTimeout.
	ErrWriteTimeout = fmt.Errorf("%w: write timed out", ErrSlowConsumer)
	// ErrClosed: the connection has ended; the message was dropped.
	ErrClosed = errors.New("websocket connection closed")
)

// Options configure a Conn. The queue bounds, the read limits and what a
// drop looks like are each user's policy; the zero value of a field is
// "none".
type Options struct {
	// Accept is passed to websocket.Accept, except CompressionMode: the
	// writer frames messages itself, so compression is always off.
	Accept websocket.AcceptOptions

	// MaxQueueFrames and MaxQueueBytes bound the messages waiting for the
	// writer (0: unbounded). A message larger than MaxQueueBytes still fits
	// an empty queue.
	MaxQueueFrames int
	MaxQueueBytes  int

	// MaxWait is how long PushWait waits for room before it drops the
	// connection. Zero makes PushWait the same as Push.
	MaxWait time.Duration

	// WriteTimeout bounds every write to the socket; a write that takes
	// longer drops the connection as a slow consumer. Zero: no deadline.
	WriteTimeout time.Duration

	// ReadLimit is the largest message ReadMessage returns. CloseLimit is
	// the largest it reads at all: a larger message closes the connection
	// with 1009 (ErrMessageTooBig), while one between the two is read to
	// its end and discarded (ErrMessageDiscarded), and the connection
	// stays. CloseLimit at or below ReadLimit (zero, say) closes for every
	// message over ReadLimit. ReadLimit zero: no limit at all.
	ReadLimit  int64
	CloseLimit int64

	// DropStatus, if not zero, is the close status sent, with DropReason,
	// to a connection dropped as a slow consumer, before its socket is
	// closed: best effort, if no write was cut short, within a second.
	// Zero, or a close frame that could not be sent, resets the socket
	// instead (an abortive close: the kernel discards what it still holds
	// for the peer).
	DropStatus websocket.StatusCode
	DropReason string
}

// dropCloseTimeout bounds the write of a slow consumer's close frame.
const dropCloseTimeout = time.Second

// Conn is one server-side WebSocket connection. See the package
// documentation for who calls what.
type Conn struct {
	ws   *websocket.Conn
	sock *sock
	q    *queue
	opts Options

	mu   sync.Mutex
	end  ending        // the zero value while the connection runs
	done chan struct{} // closed when end is set

	rbuf []byte // ReadMessage's buffer; only the reader touches it
}

// ending is how a connection ends; the first one set wins.
type ending struct {
	kind   endKind
	cause  error                // what Err reports
	code   websocket.StatusCode // of endClose
	reason string               // of endClose
}

type endKind int

const (
	running   endKind = iota
	endClose          // flush, then the close handshake with code and reason
	endTooBig         // the library sent 1009; wait for the peer's close
	endSlow           // dropped as a slow consumer, as Options.DropStatus says
	endNow            // the socket is closed
	endAbort          // the socket is reset
)

// Accept upgrades the HTTP request to a WebSocket connection. On failure
// it has answered the request with an HTTP error.
func Accept(w http.ResponseWriter, r *http.Request, opts Options) (*Conn, error) {
	hw := &hijackWriter{ResponseWriter: w, timeout: opts.WriteTimeout}
	accept := opts.Accept
	accept.CompressionMode = websocket.CompressionDisabled
	ws, err := websocket.Accept(hw, r, &accept)
	if err != nil {
		return nil, err
	}
	if hw.sock == nil {
		// Some wrapper hijacked the connection without us.
		ws.CloseNow()
		return nil, errors.New("wsconn: the connection was hijacked around the batching writer")
	}
	switch {
	case opts.ReadLimit <= 0:
		ws.SetReadLimit(-1)
	case opts.CloseLimit > opts.ReadLimit:
		ws.SetReadLimit(opts.CloseLimit)
	default:
		ws.SetReadLimit(opts.ReadLimit)
	}
	return &Conn{
		ws:   ws,
		sock: hw.sock,
		q:    newQueue(opts.MaxQueueFrames, opts.MaxQueueBytes),
		opts: opts,
		done: make(chan struct{}),
	}, nil
}

// Subprotocol returns the subprotocol the handshake selected, if any.
func (c *Conn) Subprotocol() string { return c.ws.Subprotocol() }

// Ping sends a ping and waits for its pong. Any goroutine may call it, but
// only while some goroutine is in ReadMessage: the reader receives the pong.
func (c *Conn) Ping(ctx context.Context) error { return c.ws.Ping(ctx) }

// Push queues msg for the writer and never waits. A full queue drops the
// connection: Push returns ErrQueueFull to the one caller whose message did
// not fit, and ErrClosed to every caller after it. The Conn keeps msg until
// it is written: the caller must not change it.
func (c *Conn) Push(msg []byte) error {
	return c.pushed(c.q.push(msg))
}

// PushWait is Push, except that it waits up to Options.MaxWait for room
// before it drops the connection. For a connection's answers to its own
// requests, which its reading should pace rather than refuse.
func (c *Conn) PushWait(msg []byte) error {
	if c.opts.MaxWait <= 0 {
		return c.Push(msg)
	}
	return c.pushed(c.q.pushWait(msg, c.opts.MaxWait))
}

func (c *Conn) pushed(err error) error {
	switch err {
	case nil:
		return nil
	case errFull:
		if c.setEnd(ending{kind: endSlow, cause: ErrQueueFull}) {
			return ErrQueueFull
		}
	}
	return ErrClosed
}

// Close starts an orderly close: the writer writes what is queued, then
// runs the close handshake with code and reason. It does not wait.
func (c *Conn) Close(code websocket.StatusCode, reason string) {
	c.setEnd(ending{kind: endClose, code: code, reason: reason})
}

// CloseNow closes the socket without a close frame, dropping what is
// queued. It does not wait.
func (c *Conn) CloseNow() {
	c.sock.stop()
	c.sock.Conn.Close()
	c.setEnd(ending{kind: endNow})
}

// Abort resets the socket (RST: the kernel discards what it still holds
// for the peer), dropping what is queued: for a peer that is not reading or
// not answering. It does not wait.
func (c *Conn) Abort() {
	// Reset before the writer hears of the end: its exit closes the socket,
	// and a close that came first would be orderly.
	c.sock.stop()
	c.sock.reset()
	c.setEnd(ending{kind: endAbort})
}

// Err returns why the connection ended if it ended on its own account:
// ErrQueueFull or ErrWriteTimeout (both ErrSlowConsumer), ErrMessageTooBig,
// or the error of a failed write. It returns nil while the connection is
// open and after Close, CloseNow or Abort.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end.cause
}

// setEnd records how the connection ends and reports whether this call
// did: only the first counts. It never blocks.
func (c *Conn) setEnd(e ending) bool {
	c.mu.Lock()
	if c.end.kind != running {
		c.mu.Unlock()
		return false
	}
	c.end = e
	c.mu.Unlock()
	c.q.close(e.kind != endClose)
	if e.kind == endSlow {
		c.sock.stop() // a write in progress fails
		if c.opts.DropStatus == 0 {
			c.sock.reset()
		} // else the writer sends the close frame
	}
	close(c.done) // wakes the writer, which finishes the end
	return true
}

func (c *Conn) ending() ending {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end
}

// Run is the writer. It writes batches of queued messages until the
// connection ends, finishes the end (the orderly close's flush and
// handshake, a slow consumer's close frame) and closes the socket. It
// returns what Err returns.
func (c *Conn) Run() error {
	defer c.ws.CloseNow()
	var batch [][]byte
	for {
		select {
		case <-c.q.wake:
		case <-c.done:
			c.finish()
			return c.Err()
		}
		// Let the goroutine fanning out (and other writers) run first, so
		// that more messages are queued by the time this one takes them:
		// one write(2) per batch is most of a delivery's cost, and at low
		// load this waits for nothing.
		runtime.Gosched()
		batch = c.q.take(batch)
		err := c.flush(batch)
		clear(batch)
		if err != nil {
			// A write that fails because the connection is ending (see
			// sock.stop) is no cause of its own: setEnd keeps the first.
			switch {
			case errors.Is(err, errNoData):
				// ReadMessage is closing the connection for a message
				// too big, and sets that end next.
				<-c.done
			case errors.Is(err, os.ErrDeadlineExceeded):
				c.setEnd(ending{kind: endSlow, cause: ErrWriteTimeout})
			default:
				c.setEnd(ending{kind: endNow, cause: err})
			}
			c.finish()
			return c.Err()
		}
	}
}

func (c *Conn) flush(frames [][]byte) error {
	if len(frames) == 0 {
		return nil
	}
	return c.sock.writeFrames(frames)
}

// finish carries out the end that was set.
func (c *Conn) finish() {
	e := c.ending()
	switch e.kind {
	case endClose:
		if c.flush(c.q.take(nil)) == nil {
			c.handshake(e.code, e.reason)
		}
	case endTooBig:
		// The library has sent the close frame; its Close waits for the
		// peer's, so that the peer reads the 1009 rather than a reset.
		c.handshake(websocket.StatusMessageTooBig, "")
	case endSlow:
		// A peer that cannot take even the close frame is reset: a
		// graceful close would leave the kernel trickling what it holds to
		// a peer that reads slowly, long after the connection was given up.
		if c.opts.DropStatus != 0 && !c.sock.writeCloseFrame(c.opts.DropStatus, c.opts.DropReason, dropCloseTimeout) {
			c.sock.reset()
		}
	}
}

// closeHandshakeTimeout bounds the wait for the peer's close frame. The
// library bounds it too, but not the rest of a data frame it skips on the
// way, whose length the peer declared: a read deadline bounds both.
const closeHandshakeTimeout = 5 * time.Second

func (c *Conn) handshake(code websocket.StatusCode, reason string) {
	c.sock.Conn.SetReadDeadline(time.Now().Add(closeHandshakeTimeout))
	c.ws.Close(code, reason)
}
