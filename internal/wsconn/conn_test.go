package wsconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestConn_MessagesLeaveInPushOrder(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second}, false)
	client, s := ts.dial()
	const pushers, each = 4, 500
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				if err := s.c.Push(fmt.Appendf(nil, "%d %d", p, i)); err != nil {
					t.Errorf("push: %v", err)
					return
				}
			}
		})
	}
	next := make([]int, pushers)
	for range pushers * each {
		_, data, err := client.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var p, i int
		if _, err := fmt.Sscan(string(data), &p, &i); err != nil {
			t.Fatalf("message %q: %v", data, err)
		}
		if i != next[p] {
			t.Fatalf("pusher %d: got message %d, want %d", p, i, next[p])
		}
		next[p]++
	}
	wg.Wait()
}

// The writer frames data messages itself. Messages on each side of the
// length encodings' boundaries must reach a standard client intact.
func TestConn_MessagesOfEverySizeArriveIntact(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second}, false)
	client, s := ts.dial()
	sizes := []int{0, 1, 125, 126, 127, 65535, 65536, 65537, 300000}
	for _, n := range sizes {
		s.c.Push(bytes.Repeat([]byte{byte('a' + n%26)}, n))
	}
	for _, n := range sizes {
		typ, data, err := client.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if typ != websocket.MessageText || !bytes.Equal(data, bytes.Repeat([]byte{byte('a' + n%26)}, n)) {
			t.Fatalf("message of %d bytes arrived as %d bytes of type %v", n, len(data), typ)
		}
	}
}

func TestConn_PingsInterleaveWithBatches(t *testing.T) {
	// Control frames from the library and batches from the writer share
	// the socket; neither may cut into the other. The client's reads
	// answer the server's pings, and the server's reader gets the pongs.
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second}, false)
	client, s := ts.dial()
	const n = 2000
	pad := strings.Repeat("p", 3000)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := s.c.Ping(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("ping: %v", err)
				return
			}
		}
	})
	wg.Go(func() {
		for i := range n {
			s.c.Push([]byte(strconv.Itoa(i) + " " + pad))
		}
	})
	for i := range n {
		_, data, err := client.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(i) + " " + pad; string(data) != want {
			t.Fatalf("message %d: got %.20q…", i, data)
		}
	}
	cancel()
}

func TestConn_CloseFlushesThenCloses(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second}, true)
	client, s := ts.dial()
	for i := range 100 {
		if err := s.c.Push([]byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.c.Close(websocket.StatusGoingAway, "bye")
	if err := s.c.Push([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("push after Close: %v, want ErrClosed", err)
	}
	s.c.Close(websocket.StatusInternalError, "second close") // no effect
	s.startWriter()
	for i := range 100 {
		_, data, err := client.Read(t.Context())
		if err != nil || string(data) != strconv.Itoa(i) {
			t.Fatalf("message %d: %q %v", i, data, err)
		}
	}
	_, _, err := client.Read(t.Context())
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != "bye" {
		t.Fatalf("after the queued messages: %v, want close 1001 bye", err)
	}
	if err := wait(t, s.runErr, "Run"); err != nil {
		t.Fatalf("Run after Close: %v, want nil", err)
	}
}

func TestConn_CloseNowDropsWhatIsQueued(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second}, true)
	client, s := ts.dialRaw(0)
	s.c.Push([]byte("never sent"))
	s.c.CloseNow()
	s.startWriter()
	if f, err := client.readFrame(); err == nil {
		t.Fatalf("got frame %d %q after CloseNow", f.opcode, f.payload)
	}
	if err := wait(t, s.runErr, "Run"); err != nil || s.c.Err() != nil {
		t.Fatalf("Run %v, Err %v after CloseNow; want nil", err, s.c.Err())
	}
}

// With DropStatus zero (the room gateway's policy) a push over the bounds
// resets the connection at once.
func TestConn_OverflowResets(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		push []int // sizes; the last one overflows
	}{
		{"frames", Options{MaxQueueFrames: 3, MaxQueueBytes: 1 << 20}, []int{1, 1, 1, 1}},
		{"bytes", Options{MaxQueueFrames: 100, MaxQueueBytes: 100}, []int{60, 30, 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.WriteTimeout = 10 * time.Second
			ts := startServer(t, tc.opts, true)
			client, s := ts.dialRaw(0)
			last := len(tc.push) - 1
			for _, n := range tc.push[:last] {
				if err := s.c.Push(make([]byte, n)); err != nil {
					t.Fatalf("push within the bounds: %v", err)
				}
			}
			if err := s.c.Push(make([]byte, tc.push[last])); !errors.Is(err, ErrQueueFull) || !errors.Is(err, ErrSlowConsumer) {
				t.Fatalf("push over the bounds: %v, want ErrQueueFull", err)
			}
			if err := s.c.Push([]byte("x")); !errors.Is(err, ErrClosed) {
				t.Fatalf("push after the drop: %v, want ErrClosed (the drop is reported once)", err)
			}
			_, err := client.readFrame()
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("client read after the drop: %v, want a reset", err)
			}
			s.startWriter()
			if err := wait(t, s.runErr, "Run"); !errors.Is(err, ErrQueueFull) {
				t.Fatalf("Run: %v, want ErrQueueFull", err)
			}
			if !errors.Is(s.c.Err(), ErrQueueFull) {
				t.Fatalf("Err: %v", s.c.Err())
			}
		})
	}
}

// With DropStatus set (the relay's policy) a dropped connection that still
// takes bytes is told why.
func TestConn_OverflowSendsDropStatus(t *testing.T) {
	ts := startServer(t, Options{MaxQueueFrames: 1, DropStatus: websocket.StatusPolicyViolation, DropReason: "slow consumer", WriteTimeout: 10 * time.Second}, true)
	client, s := ts.dialRaw(0)
	s.c.Push([]byte("queued"))
	if err := s.c.Push([]byte("over")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("push over the bound: %v", err)
	}
	s.startWriter()
	f, err := client.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.closeCode() != websocket.StatusPolicyViolation || string(f.payload[2:]) != "slow consumer" {
		t.Fatalf("first frame after the drop: opcode %d %q, want only close 1008 slow consumer (queued messages are dropped)", f.opcode, f.payload)
	}
	if f, err := client.readFrame(); err == nil {
		t.Fatalf("frame %d after the close frame", f.opcode)
	}
	if err := wait(t, s.runErr, "Run"); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Run: %v", err)
	}
}

// A dropped peer that cannot take even the close frame is reset, rather
// than left to the kernel to trickle megabytes to. A write that timed out
// shows that its socket was full.
func TestConn_DropStatusResetsAPeerThatCannotTakeIt(t *testing.T) {
	ts := startServer(t, Options{DropStatus: websocket.StatusPolicyViolation, WriteTimeout: 100 * time.Millisecond}, false)
	client, s := ts.dialRaw(4096) // and does not read until dropped
	big := make([]byte, 256<<10)
	for range 64 { // 16 MiB, more than the socket buffers hold
		if s.c.Push(big) != nil {
			break
		}
	}
	if err := wait(t, s.runErr, "Run"); !errors.Is(err, ErrWriteTimeout) {
		t.Fatalf("Run: %v", err)
	}
	client.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, client.br); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("client read after the drop: %v, want a reset", err)
	}
}

// Push never waits, whatever MaxWait says; a connection's own answers
// (PushWait) wait for room up to MaxWait instead of dropping it at once.
func TestConn_PushWait(t *testing.T) {
	opts := Options{MaxQueueFrames: 1, WriteTimeout: 10 * time.Second}
	t.Run("Push does not wait", func(t *testing.T) {
		opts.MaxWait = time.Minute
		_, s := startServer(t, opts, true).dialRaw(0)
		s.c.Push([]byte("queued"))
		if err := s.c.Push([]byte("broadcast")); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("Push over the bound: %v, want ErrQueueFull at once", err)
		}
	})
	t.Run("room made", func(t *testing.T) {
		opts.MaxWait = time.Minute
		client, s := startServer(t, opts, true).dial()
		s.c.Push([]byte("queued"))
		done := make(chan error, 1)
		go func() { done <- s.c.PushWait([]byte("answer")) }()
		s.startWriter() // the writer takes "queued" and so makes room
		if err := wait(t, done, "PushWait"); err != nil {
			t.Fatalf("PushWait once room was made: %v", err)
		}
		for _, want := range []string{"queued", "answer"} {
			if _, data, err := client.Read(t.Context()); err != nil || string(data) != want {
				t.Fatalf("got %q %v, want %q", data, err, want)
			}
		}
	})
	t.Run("no room in time", func(t *testing.T) {
		opts.MaxWait = 50 * time.Millisecond
		_, s := startServer(t, opts, true).dialRaw(0)
		s.c.Push([]byte("queued"))
		if err := s.c.PushWait([]byte("answer")); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("PushWait with no writer: %v, want ErrQueueFull after MaxWait", err)
		}
		s.startWriter()
		if err := wait(t, s.runErr, "Run"); !errors.Is(err, ErrSlowConsumer) {
			t.Fatalf("Run: %v", err)
		}
	})
}

// A peer that stops reading fills its socket buffers; the write past the
// deadline drops it as a slow consumer.
func TestConn_WriteTimeoutIsASlowConsumer(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 100 * time.Millisecond}, false)
	_, s := ts.dialRaw(4096) // and never reads
	big := make([]byte, 256<<10)
	for range 64 { // 16 MiB, more than the socket buffers hold
		if s.c.Push(big) != nil {
			break
		}
	}
	err := wait(t, s.runErr, "Run")
	if !errors.Is(err, ErrWriteTimeout) || !errors.Is(err, ErrSlowConsumer) {
		t.Fatalf("Run: %v, want ErrWriteTimeout", err)
	}
	if err := s.c.Push([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("push after the drop: %v", err)
	}
}

func TestConn_AbortResets(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second, DropStatus: websocket.StatusPolicyViolation}, false)
	client, s := ts.dialRaw(0)
	s.c.Abort()
	if _, err := client.readFrame(); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("client read after Abort: %v, want a reset", err)
	}
	if err := wait(t, s.runErr, "Run"); err != nil {
		t.Fatalf("Run after Abort: %v, want nil", err)
	}
}

// CloseNow takes effect during a close handshake a peer does not answer.
func TestConn_CloseNowCutsAHandshakeShort(t *testing.T) {
	ts := startServer(t, Options{WriteTimeout: 10 * time.Second}, false)
	client, s := ts.dialRaw(0)
	s.c.Close(websocket.StatusNormalClosure, "")
	f, err := client.readFrame()
	if err != nil || f.closeCode() != websocket.StatusNormalClosure {
		t.Fatalf("got %v %v, want the close frame", f, err)
	}
	// The client does not answer; the server would wait five seconds.
	start := time.Now()
	s.c.CloseNow()
	wait(t, s.runErr, "Run")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Run returned %v after CloseNow", d)
	}
}

func TestConn_ReadLimits(t *testing.T) {
	const soft, hard = 1000, 4000
	ts := startServer(t, Options{ReadLimit: soft, CloseLimit: hard, WriteTimeout: 10 * time.Second}, false)
	client, s := ts.dialRaw(0)
	for _, n := range []int{0, 1, soft} {
		client.send(bytes.Repeat([]byte("a"), n))
		if got := wait(t, s.msgs, "message"); len(got) != n {
			t.Fatalf("message of %d bytes read as %d", n, len(got))
		}
	}
	for _, n := range []int{soft + 1, hard} {
		client.send(bytes.Repeat([]byte("b"), n))
		if got := wait(t, s.msgs, "message"); got != nil {
			t.Fatalf("message of %d bytes over ReadLimit read as %d bytes, want discarded", n, len(got))
		}
	}
	client.send([]byte("still open"))
	if got := wait(t, s.msgs, "message"); string(got) != "still open" {
		t.Fatalf("after discarded messages: %q", got)
	}
	client.send(bytes.Repeat([]byte("c"), hard+1))
	if err := wait(t, s.readErr, "read error"); !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("message over CloseLimit: %v, want ErrMessageTooBig", err)
	}
	f, err := client.readFrame()
	if err != nil || f.closeCode() != websocket.StatusMessageTooBig {
		t.Fatalf("client got %v %v, want close 1009", f, err)
	}
	if err := wait(t, s.runErr, "Run"); !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("Run: %v", err)
	}
}

// With no CloseLimit above ReadLimit (the relay), every message over the
// limit closes the connection, whatever its framing.
func TestConn_ReadLimitWithoutDiscard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames [][]byte
	}{
		{"one frame", [][]byte{maskedFrame(0x81, bytes.Repeat([]byte("x"), 101))}},
		{"fragments", [][]byte{
			maskedFrame(0x01, bytes.Repeat([]byte("x"), 60)), // text, not final
			maskedFrame(0x80, bytes.Repeat([]byte("x"), 60)), // continuation, final
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{ReadLimit: 100, WriteTimeout: 10 * time.Second}, false)
			client, s := ts.dialRaw(0)
			client.send(bytes.Repeat([]byte("y"), 100))
			if got := wait(t, s.msgs, "message"); len(got) != 100 {
				t.Fatalf("message at the limit read as %d bytes", len(got))
			}
			for _, f := range tc.frames {
				client.conn.Write(f)
			}
			if err := wait(t, s.readErr, "read error"); !errors.Is(err, ErrMessageTooBig) {
				t.Fatalf("message over the limit: %v, want ErrMessageTooBig", err)
			}
			if f, err := client.readFrame(); err != nil || f.closeCode() != websocket.StatusMessageTooBig {
				t.Fatalf("client got %v %v, want close 1009", f, err)
			}
		})
	}
}

// After the 1009 close frame, no data frame follows, however much was
// queued.
func TestConn_NoDataAfterTheTooBigClose(t *testing.T) {
	ts := startServer(t, Options{ReadLimit: 100, MaxQueueFrames: 1000, MaxWait: time.Minute, WriteTimeout: 10 * time.Second}, false)
	client, s := ts.dialRaw(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s.c.PushWait([]byte("data")) != nil {
				return
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	client.send(bytes.Repeat([]byte("x"), 101))
	for {
		f, err := client.readFrame()
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		if f.opcode == 8 {
			if f.closeCode() != websocket.StatusMessageTooBig {
				t.Fatalf("close %d", f.closeCode())
			}
			break
		}
	}
	client.conn.Write(maskedFrame(0x88, binary.BigEndian.AppendUint16(nil, uint16(websocket.StatusMessageTooBig))))
	for {
		f, err := client.readFrame()
		if err != nil {
			break // the server closed the connection
		}
		t.Fatalf("frame %d %q after the close frame", f.opcode, f.payload)
	}
}

func TestAppendTextFrame_LengthEncodings(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 65535, 65536, 70000} {
		p := []byte(strings.Repeat("y", n))
		f := appendTextFrame([]byte("prefix"), p)[len("prefix"):]
		if f[0] != 0x81 {
			t.Fatalf("%d: first byte %#x, want FIN+text", n, f[0])
		}
		var length, header int
		switch l := int(f[1]); {
		case l&0x80 != 0:
			t.Fatalf("%d: server frames must not be masked", n)
		case l < 126:
			length, header = l, 2
		case l == 126:
			length, header = int(f[2])<<8|int(f[3]), 4
		default:
			length, header = int(binary.BigEndian.Uint64(f[2:10])), 10
		}
		if length != n || len(f) != header+n || string(f[header:]) != string(p) {
			t.Fatalf("%d: decoded length %d header %d total %d", n, length, header, len(f))
		}
		if n < 126 && header != 2 {
			t.Fatalf("%d: %d-byte header; lengths under 126 take the short form", n, header)
		}
	}
}

func TestAppendCloseFrame_CutsTheReasonToFit(t *testing.T) {
	f := appendCloseFrame(nil, websocket.StatusPolicyViolation, strings.Repeat("r", 200))
	if f[0] != 0x88 || int(f[1]) != len(f)-2 || len(f)-2 > 125 {
		t.Fatalf("close frame header %x, length %d: a control frame carries at most 125 bytes", f[:2], len(f)-2)
	}
	if code := binary.BigEndian.Uint16(f[2:4]); code != uint16(websocket.StatusPolicyViolation) {
		t.Fatalf("code %d", code)
	}
}
