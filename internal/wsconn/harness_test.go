package wsconn

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// served is one accepted connection as its handler sees it. The handler
// owns the Conn the way the relay and the gateway do: it runs the writer,
// reads until the connection ends, then closes it and waits.
type served struct {
	c       *Conn
	msgs    chan []byte   // messages read, and nil for a discarded one
	readErr chan error    // why reading stopped
	runErr  chan error    // what Run returned
	start   chan struct{} // closed to start the writer
	once    sync.Once
}

// startWriter lets the writer of a served connection run, for a server
// started with holdWriter.
func (s *served) startWriter() { s.once.Do(func() { close(s.start) }) }

// testServer accepts websocket connections with opts on a loopback port.
type testServer struct {
	t     *testing.T
	url   string
	conns chan *served
}

// startServer serves opts. With holdWriter, each connection's writer waits
// for served.startWriter, so that a test can fill its queue first.
func startServer(t *testing.T, opts Options, holdWriter bool) *testServer {
	t.Helper()
	ts := &testServer{t: t, conns: make(chan *served, 4)}
	var handlers sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, opts)
		if err != nil {
			return
		}
		handlers.Add(1)
		defer handlers.Done()
		s := &served{c: c, msgs: make(chan []byte, 1024), readErr: make(chan error, 1), runErr: make(chan error, 1), start: make(chan struct{})}
		if !holdWriter {
			s.startWriter()
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			<-s.start
			s.runErr <- c.Run()
		})
		defer wg.Wait()
		ts.conns <- s
		for {
			_, data, err := c.ReadMessage(context.Background())
			if errors.Is(err, ErrMessageDiscarded) {
				s.msgs <- nil
				continue
			}
			if err != nil {
				s.readErr <- err
				break
			}
			s.msgs <- append([]byte{}, data...)
		}
		c.CloseNow()
		s.startWriter() // Run must run, even for a test that never started it
	}))
	t.Cleanup(func() {
		srv.Close()
		handlers.Wait()
	})
	ts.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return ts
}

// next returns the connection the server accepted next.
func (ts *testServer) next() *served {
	ts.t.Helper()
	select {
	case s := <-ts.conns:
		return s
	case <-time.After(testwait.Timeout(10 * time.Second)):
		ts.t.Fatal("no connection accepted")
		return nil
	}
}

// dial connects a websocket client and returns it with the server's side.
func (ts *testServer) dial() (*websocket.Conn, *served) {
	ts.t.Helper()
	ctx, cancel := testwait.Context(ts.t, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, ts.url, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	c.SetReadLimit(-1)
	ts.t.Cleanup(func() { c.CloseNow() })
	return c, ts.next()
}

// rawClient is a websocket client by hand, for what a library client hides:
// frames exactly as sent, a socket that stops reading, a reset.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

// dialRaw connects with a receive buffer of rcvbuf bytes (0: the default).
func (ts *testServer) dialRaw(rcvbuf int) (*rawClient, *served) {
	ts.t.Helper()
	d := net.Dialer{}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	addr := strings.TrimPrefix(ts.url, "ws://")
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { conn.Close() })
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		addr, base64.StdEncoding.EncodeToString(key))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		ts.t.Fatalf("handshake: %v %v", resp, err)
	}
	return &rawClient{t: ts.t, conn: conn, br: br}, ts.next()
}

// frame is one frame as the server sent it.
type frame struct {
	opcode  byte
	payload []byte
}

func (f frame) closeCode() websocket.StatusCode {
	if f.opcode != 8 || len(f.payload) < 2 {
		return -1
	}
	return websocket.StatusCode(binary.BigEndian.Uint16(f.payload))
}

// readFrame reads one frame. Server frames are final and unmasked here.
func (c *rawClient) readFrame() (frame, error) {
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return frame{}, err
	}
	if h[0]&0x80 == 0 || h[1]&0x80 != 0 {
		c.t.Fatalf("frame header %x: want final and unmasked", h)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return frame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return frame{}, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c.br, p); err != nil {
		return frame{}, err
	}
	return frame{opcode: h[0] & 0x0f, payload: p}, nil
}

// send writes a message as one masked text frame.
func (c *rawClient) send(payload []byte) error {
	_, err := c.conn.Write(maskedFrame(0x81, payload))
	return err
}

// maskedFrame is a client frame: first is FIN and the opcode.
func maskedFrame(first byte, payload []byte) []byte {
	out := []byte{first}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n < 1<<16:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	out = append(out, mask[:]...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	return out
}

// wait returns what ch delivers, failing the test after 10 s.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
