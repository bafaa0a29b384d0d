package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CEP-41 open streams: a tool call opens a stream on its progress token and
// sends chunks until it closes it; its result follows the close. Frames are
// notifications/progress with params.cvm of type "open-stream":
//
//	start {contentType?}  chunk {chunkIndex, data}  ping {nonce}  pong {nonce}
//	close {lastChunkIndex?}  abort {reason?}
//
// The outer progress value strictly increases per sender. Streams are
// opt-in on both sides (support_open_stream), as in the reference.

const openStreamType = "open-stream"

// Errors of open streams.
var (
	// ErrStreamsUnsupported is returned by Server.OpenStream when streaming is
	// off, the request carries no progress token, or the client has not said
	// it reads streams.
	ErrStreamsUnsupported = errors.New("open streams (CEP-41) unavailable for this request")
	// ErrStreamAborted is returned when either side aborted a stream.
	ErrStreamAborted = errors.New("stream aborted")
	// ErrStreamClosed is returned by writes to a closed stream.
	ErrStreamClosed = errors.New("stream closed")
)

// StreamLimits bound an open stream. Zero fields take the defaults beside
// them (the reference's).
type StreamLimits struct {
	MaxBufferedChunks int           // chunks held for a reader (64)
	MaxBufferedBytes  int           // bytes held for a reader (512 KiB)
	IdleTimeout       time.Duration // quiet time before a reader probes with a ping (30 s)
	ProbeTimeout      time.Duration // time a ping has to be answered (20 s)
}

func (l StreamLimits) withDefaults() StreamLimits {
	if l.MaxBufferedChunks <= 0 {
		l.MaxBufferedChunks = 64
	}
	if l.MaxBufferedBytes <= 0 {
		l.MaxBufferedBytes = 512 << 10
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 30 * time.Second
	}
	if l.ProbeTimeout <= 0 {
		l.ProbeTimeout = 20 * time.Second
	}
	return l
}

// streamFrame is params.cvm of a CEP-41 frame.
type streamFrame struct {
	Type           string  `json:"type"`
	FrameType      string  `json:"frameType"`
	ContentType    string  `json:"contentType,omitempty"`
	ChunkIndex     *int    `json:"chunkIndex,omitempty"`
	Data           *string `json:"data,omitempty"`
	Nonce          string  `json:"nonce,omitempty"`
	LastChunkIndex *int    `json:"lastChunkIndex,omitempty"`
	Reason         string  `json:"reason,omitempty"`
}

type streamProgress struct {
	ProgressToken mcpmsg.Token `json:"progressToken"`
	Progress      float64      `json:"progress"`
	CVM           *streamFrame `json:"cvm"`
}

// parseStreamFrame recognizes a CEP-41 frame in notifications/progress params.
func parseStreamFrame(params json.RawMessage) (p streamProgress, ok bool, err error) {
	var probe struct {
		CVM *struct {
			Type string `json:"type"`
		} `json:"cvm"`
	}
	if len(params) == 0 || json.Unmarshal(params, &probe) != nil || probe.CVM == nil || probe.CVM.Type != openStreamType {
		return p, false, nil
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProgressToken.IsZero() {
		return p, true, fmt.Errorf("malformed open-stream frame: %v", err)
	}
	return p, true, nil
}

func streamFrameRequest(token mcpmsg.Token, progress int, f *streamFrame) *jsonrpc.Request {
	f.Type = openStreamType
	params, _ := json.Marshal(streamProgress{ProgressToken: token, Progress: float64(progress), CVM: f})
	return &jsonrpc.Request{Method: mcpmsg.MethodProgress, Params: params}
}

// StreamWriter is the server side of an open stream: a tool handler writes
// chunks to it and closes it, after which the tool's result is sent. Its
// methods are safe for concurrent use; frames go out in call order.
type StreamWriter struct {
	token mcpmsg.Token
	send  func(ctx context.Context, frame *jsonrpc.Request) error
	// onDone runs once the stream is closed or aborted, to release the
	// response that was held behind it: before it returns when wait is set
	// (the handler closed the stream), on a goroutine of the session when
	// not (the client's abort, handled by the server's router, which must
	// not wait for a publish).
	onDone func(wait bool)

	mu       sync.Mutex // serializes frames
	progress int
	next     int // next chunk index
	started  bool
	ended    bool
	err      error
	aborted  chan struct{} // closed when the client aborts
	once     sync.Once
}

// Aborted is closed when the stream has ended: closed, or aborted by either
// side. A producer should stop writing then.
func (w *StreamWriter) Aborted() <-chan struct{} { return w.aborted }

func (w *StreamWriter) finished() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

func (w *StreamWriter) frameLocked(ctx context.Context, f *streamFrame) error {
	w.progress++
	return w.send(ctx, streamFrameRequest(w.token, w.progress, f))
}

func (w *StreamWriter) startLocked(ctx context.Context) error {
	if w.started {
		return nil
	}
	w.started = true
	return w.frameLocked(ctx, &streamFrame{FrameType: "start"})
}

// Write sends one chunk.
func (w *StreamWriter) Write(ctx context.Context, data string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		if w.err != nil {
			return w.err
		}
		return ErrStreamClosed
	}
	if err := w.startLocked(ctx); err != nil {
		return err
	}
	idx := w.next
	if err := w.frameLocked(ctx, &streamFrame{FrameType: "chunk", ChunkIndex: &idx, Data: &data}); err != nil {
		return err
	}
	w.next++
	return nil
}

// Close ends the stream; the tool's result follows it.
func (w *StreamWriter) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return w.err
	}
	err := w.startLocked(ctx)
	if err == nil {
		f := &streamFrame{FrameType: "close"}
		if w.next > 0 {
			last := w.next - 1
			f.LastChunkIndex = &last
		}
		err = w.frameLocked(ctx, f)
	}
	w.ended = true
	w.mu.Unlock()
	w.finish(true)
	return err
}

// Abort ends the stream with a reason.
func (w *StreamWriter) Abort(ctx context.Context, reason string) error {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return nil
	}
	w.ended = true
	w.err = fmt.Errorf("%w: %s", ErrStreamAborted, reason)
	err := w.frameLocked(ctx, &streamFrame{FrameType: "abort", Reason: reason})
	w.mu.Unlock()
	w.finish(true)
	return err
}

// remoteAbort records the client's abort.
func (w *StreamWriter) remoteAbort(reason string) {
	w.mu.Lock()
	if !w.ended {
		w.ended = true
		w.err = fmt.Errorf("%w by the client: %s", ErrStreamAborted, reason)
	}
	w.mu.Unlock()
	w.finish(false)
}

// pong answers a client's liveness probe.
func (w *StreamWriter) pong(ctx context.Context, nonce string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.frameLocked(ctx, &streamFrame{FrameType: "pong", Nonce: nonce})
	}
}

func (w *StreamWriter) finish(wait bool) {
	w.once.Do(func() {
		close(w.aborted)
		if w.onDone != nil {
			w.onDone(wait)
		}
	})
}

// StreamReader is the client side of an open stream. Next returns chunks in
// order; io.EOF after a clean close. A reader that hears nothing for
// IdleTimeout pings the server and aborts when no pong comes. Closing the
// client connection ends the reader with mcp.ErrConnectionClosed.
type StreamReader struct {
	token  mcpmsg.Token
	limits StreamLimits
	// The connection provides: send publishes a frame and returns once it
	// is out; async runs f on a goroutine the connection owns (or not at
	// all once it is closing); onEnd tells it the reader has ended.
	send  func(ctx context.Context, frame *jsonrpc.Request) error
	async func(f func(ctx context.Context))
	onEnd func()

	mu       sync.Mutex
	ready    chan struct{} // 1-buffered: something changed
	started  bool
	next     int            // next chunk index to hand out
	buffered map[int]string // out-of-order chunks
	queue    []string       // in order, not yet read
	bytes    int
	last     *int // lastChunkIndex of the close frame
	closed   bool // close frame seen
	err      error
	done     bool
	progress int // of frames this reader sends (pings, aborts)
	lastSeen time.Time
	probe    string      // nonce of an unanswered ping
	timer    *time.Timer // the liveness probe; set by arm, under mu
}

func newStreamReader(token mcpmsg.Token, limits StreamLimits) *StreamReader {
	return &StreamReader{
		token:    token,
		limits:   limits.withDefaults(),
		ready:    make(chan struct{}, 1),
		buffered: make(map[int]string),
		lastSeen: time.Now(),
	}
}

// arm starts the liveness probe on a timer made by afterFunc. The timer is
// set under the reader's lock, which its callback takes first: the callback
// cannot see it unset.
func (r *StreamReader) arm(afterFunc func(time.Duration, func(context.Context)) *time.Timer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.timer = afterFunc(r.limits.IdleTimeout, func(context.Context) { r.watch() })
	}
}

// Next returns the next chunk, io.EOF once the stream closed and every
// chunk was read, or the error that ended it.
func (r *StreamReader) Next(ctx context.Context) (string, error) {
	for {
		r.mu.Lock()
		if len(r.queue) > 0 {
			data := r.queue[0]
			r.queue = r.queue[1:]
			r.bytes -= len(data)
			r.mu.Unlock()
			return data, nil
		}
		if r.done {
			err := r.err
			r.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return "", err
		}
		r.mu.Unlock()
		select {
		case <-r.ready:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Abort tells the server to stop the stream.
func (r *StreamReader) Abort(ctx context.Context, reason string) error {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return nil
	}
	r.progress++
	progress := r.progress
	r.finishLocked(fmt.Errorf("%w: %s", ErrStreamAborted, reason))
	r.mu.Unlock()
	return r.send(ctx, streamFrameRequest(r.token, progress, &streamFrame{FrameType: "abort", Reason: reason}))
}

// end ends the reader with err, telling the server nothing: its
// connection is gone.
func (r *StreamReader) end(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked(err)
}

func (r *StreamReader) wake() {
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// finishLocked ends the reader with err (nil for a clean close).
func (r *StreamReader) finishLocked(err error) {
	if r.done {
		return
	}
	r.done, r.err = true, err
	if r.timer != nil {
		r.timer.Stop()
	}
	r.wake()
	if r.onEnd != nil {
		r.onEnd() // takes only the connection's stream table lock
	}
}

// sendLater publishes frame on a goroutine of the connection: the reader's
// lock is held, and the read loop must not wait for the network.
func (r *StreamReader) sendLater(frame *jsonrpc.Request) {
	r.async(func(ctx context.Context) { r.send(ctx, frame) })
}

// frame takes one inbound frame. A returned error is a protocol violation
// the caller answers with an abort.
func (r *StreamReader) frame(f *streamFrame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	r.lastSeen = time.Now()
	switch f.FrameType {
	case "start":
		r.started = true
	case "accept":
	case "chunk":
		if !r.started || f.ChunkIndex == nil || f.Data == nil {
			return fmt.Errorf("%w: chunk before start or without index and data", ErrStreamAborted)
		}
		i := *f.ChunkIndex
		if _, dup := r.buffered[i]; i < r.next || dup {
			return fmt.Errorf("%w: chunk %d repeated", ErrStreamAborted, i)
		}
		if len(r.buffered)+len(r.queue) >= r.limits.MaxBufferedChunks || r.bytes+len(*f.Data) > r.limits.MaxBufferedBytes {
			return fmt.Errorf("%w: reader's buffer is full (%d chunks, %d bytes)", ErrStreamAborted, len(r.buffered)+len(r.queue), r.bytes)
		}
		r.buffered[i] = *f.Data
		r.bytes += len(*f.Data)
		for {
			data, ok := r.buffered[r.next]
			if !ok {
				break
			}
			delete(r.buffered, r.next)
			r.queue = append(r.queue, data)
			r.next++
		}
		r.wake()
	case "close":
		r.closed, r.last = true, f.LastChunkIndex
	case "abort":
		r.finishLocked(fmt.Errorf("%w by the server: %s", ErrStreamAborted, f.Reason))
		return nil
	case "pong":
		if f.Nonce == r.probe {
			r.probe = ""
		}
	case "ping":
		r.progress++
		r.sendLater(streamFrameRequest(r.token, r.progress, &streamFrame{FrameType: "pong", Nonce: f.Nonce}))
	}
	if r.closed && len(r.buffered) == 0 {
		if r.last != nil && r.next != *r.last+1 {
			return fmt.Errorf("%w: closed after chunk %d, but chunks up to %d were announced", ErrStreamAborted, r.next-1, *r.last)
		}
		r.finishLocked(nil)
	}
	return nil
}

// watch probes an idle stream: a ping after IdleTimeout of silence, and an
// abort when the pong does not come within ProbeTimeout. Until the server
// starts the stream there is nothing to ping (the server may not have
// reached the tool yet); the request's own timeout covers that time.
func (r *StreamReader) watch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	switch {
	case !r.started:
		r.timer.Reset(r.limits.IdleTimeout)
	case r.probe != "":
		if time.Since(r.lastSeen) >= r.limits.ProbeTimeout {
			r.progress++
			progress := r.progress
			r.finishLocked(fmt.Errorf("%w: the server did not answer a ping", ErrStreamAborted))
			r.sendLater(streamFrameRequest(r.token, progress, &streamFrame{FrameType: "abort", Reason: "probe timeout"}))
			return
		}
		r.timer.Reset(r.limits.ProbeTimeout - time.Since(r.lastSeen))
	case time.Since(r.lastSeen) >= r.limits.IdleTimeout:
		r.progress++
		r.probe = strconv.Itoa(r.progress)
		r.lastSeen = time.Now()
		r.sendLater(streamFrameRequest(r.token, r.progress, &streamFrame{FrameType: "ping", Nonce: r.probe}))
		r.timer.Reset(r.limits.ProbeTimeout)
	default:
		r.timer.Reset(r.limits.IdleTimeout - time.Since(r.lastSeen))
	}
}

// OpenStream opens a CEP-41 stream for the tool call req, which must have
// arrived through this server with a progress token, from a client that
// reads open streams. The call's result is held back until the stream is
// closed or aborted. A handler without a stream should fall back to a
// plain result.
func (s *Server) OpenStream(req mcp.Request) (*StreamWriter, error) {
	if !s.opts.OpenStreams {
		return nil, fmt.Errorf("%w: the server has open streams off", ErrStreamsUnsupported)
	}
	client, ok1 := ClientPubkey(req)
	eventID, ok2 := RequestEventID(req)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: the request did not come through this server", ErrStreamsUnsupported)
	}
	c := s.sessions.get(client)
	if c == nil {
		return nil, fmt.Errorf("%w: no session for the client", ErrStreamsUnsupported)
	}
	return c.openStream(eventID.Hex())
}
