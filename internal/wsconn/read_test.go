package wsconn

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
)

// chunkReader returns msg in reads of the sizes in chunks (cycled, 0 read
// as 1), and counts what it returned.
type chunkReader struct {
	msg    []byte
	chunks []byte
	i      int
	read   int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.msg) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.chunks) > 0 {
		n = max(int(r.chunks[r.i%len(r.chunks)]), 1)
		r.i++
	}
	n = min(n, len(p), len(r.msg))
	copy(p, r.msg[:n])
	r.msg = r.msg[n:]
	r.read += n
	return n, nil
}

// wantRead is the outcome readLimited must have for a message of n bytes.
func wantRead(n int, soft, hard int64) error {
	switch {
	case soft <= 0 || int64(n) <= soft:
		return nil
	case int64(n) <= hard:
		return ErrMessageDiscarded
	default:
		return ErrMessageTooBig
	}
}

func TestReadLimited_Boundaries(t *testing.T) {
	const soft, hard = 10, 20
	for n := range 40 {
		msg := bytes.Repeat([]byte("m"), n)
		for _, r := range []io.Reader{bytes.NewReader(msg), iotest.OneByteReader(bytes.NewReader(msg)), iotest.DataErrReader(bytes.NewReader(msg))} {
			over := false
			got, err := readLimited(r, nil, soft, hard, func() { over = true })
			want := wantRead(n, soft, hard)
			if err != want {
				t.Fatalf("%d bytes: %v, want %v", n, err, want)
			}
			if over != (want == ErrMessageTooBig) {
				t.Fatalf("%d bytes: overHard called %v", n, over)
			}
			if want == nil && !bytes.Equal(got, msg) {
				t.Fatalf("%d bytes: read %d", n, len(got))
			}
			if want != nil && len(got) != 0 {
				t.Fatalf("%d bytes: %v with %d bytes", n, err, len(got))
			}
		}
	}
}

func TestReadLimited_PassesOtherErrorsOn(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(boom))
	if _, err := readLimited(r, nil, 10, 20, func() {}); err != boom {
		t.Fatalf("got %v, want the reader's error", err)
	}
	// Past ReadLimit, while discarding, too.
	r = io.MultiReader(bytes.NewReader(make([]byte, 15)), iotest.ErrReader(boom))
	if _, err := readLimited(r, nil, 10, 20, func() {}); err != boom {
		t.Fatalf("got %v while discarding, want the reader's error", err)
	}
}

// FuzzReadLimited checks readLimited against its specification for any
// message, read in any pieces, under any limits: the message whole, or
// the right error, and never more than hard+1 bytes read (and one more
// read to trip the library's limit).
func FuzzReadLimited(f *testing.F) {
	f.Add([]byte("hello"), []byte{1, 2, 3}, int16(3), int16(4))
	f.Add(bytes.Repeat([]byte("x"), 100), []byte{7}, int16(10), int16(50))
	f.Add(bytes.Repeat([]byte("y"), 51), []byte{}, int16(50), int16(0))
	f.Add([]byte{}, []byte{0}, int16(0), int16(0))
	f.Fuzz(func(t *testing.T, msg, chunks []byte, soft16, close16 int16) {
		soft, hard := int64(soft16), max(int64(soft16), int64(close16))
		r := &chunkReader{msg: msg, chunks: chunks}
		overs := 0
		got, err := readLimited(r, make([]byte, 0, len(chunks)), soft, hard, func() { overs++ })
		want := wantRead(len(msg), soft, hard)
		if err != want {
			t.Fatalf("%d bytes, limits %d/%d: %v, want %v", len(msg), soft, hard, err, want)
		}
		if want == nil && !bytes.Equal(got, msg) {
			t.Fatalf("%d bytes, limits %d/%d: read %d bytes", len(msg), soft, hard, len(got))
		}
		if want == ErrMessageTooBig && overs != 1 {
			t.Fatalf("overHard called %d times", overs)
		}
		if soft > 0 && int64(r.read) > hard+2 {
			t.Fatalf("read %d bytes of a message with hard limit %d", r.read, hard)
		}
	})
}

// pipeConn accepts a Conn over an in-memory pipe, without an HTTP server:
// the client side gets no handshake response, only what the Conn writes.
func pipeConn(t testing.TB, opts Options) (*Conn, net.Conn) {
	t.Helper()
	srv, cli := net.Pipe()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	c, err := Accept(&pipeWriter{conn: srv, header: http.Header{}}, req, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, cli
}

// pipeWriter is an http.ResponseWriter whose Hijack returns a pipe.
type pipeWriter struct {
	conn   net.Conn
	header http.Header
}

func (w *pipeWriter) Header() http.Header         { return w.header }
func (w *pipeWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *pipeWriter) WriteHeader(int)             {}
func (w *pipeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// FuzzReadMessage feeds arbitrary client bytes to a served connection: no
// input may crash or wedge it, a message returned is within ReadLimit, and
// once a message was too big reading stops.
func FuzzReadMessage(f *testing.F) {
	for _, seed := range [][]byte{
		maskedFrame(0x81, []byte("hello")),
		maskedFrame(0x81, bytes.Repeat([]byte("a"), 40)),  // discarded
		maskedFrame(0x81, bytes.Repeat([]byte("b"), 200)), // too big
		append(maskedFrame(0x01, []byte("frag")), maskedFrame(0x80, []byte("ment"))...),
		append(maskedFrame(0x89, []byte("ping")), maskedFrame(0x82, []byte{0, 1})...),
		maskedFrame(0x88, []byte{0x03, 0xe8}),
		{0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // a length no one sends
		{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'},                        // unmasked
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		const soft, hard = 32, 128
		c, cli := pipeConn(t, Options{ReadLimit: soft, CloseLimit: hard, WriteTimeout: time.Second})
		var wg sync.WaitGroup
		wg.Go(func() { c.Run() })
		wg.Go(func() { io.Copy(io.Discard, cli) }) // pongs, close frames
		wg.Go(func() {
			cli.Write(input)
			cli.Close()
		})
		ctx, cancel := testwait.Context(t, 10*time.Second)
		defer cancel()
		for {
			_, data, err := c.ReadMessage(ctx)
			if errors.Is(err, ErrMessageDiscarded) {
				continue
			}
			if errors.Is(err, ErrMessageTooBig) {
				if _, _, err := c.ReadMessage(ctx); err == nil {
					t.Fatal("read a message after one was too big")
				}
				break
			}
			if err != nil {
				if ctx.Err() != nil {
					t.Fatal("reading wedged")
				}
				break
			}
			if len(data) > soft {
				t.Fatalf("returned %d bytes over the %d-byte limit", len(data), soft)
			}
		}
		c.CloseNow()
		wg.Wait()
	})
}

func TestReadMessage_OverAPipe(t *testing.T) {
	c, cli := pipeConn(t, Options{ReadLimit: 32, WriteTimeout: time.Second})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.CloseNow()
	wg.Go(func() { c.Run() })
	wg.Go(func() { io.Copy(io.Discard, cli) })
	wg.Go(func() { cli.Write(maskedFrame(0x81, []byte("over a pipe"))) })
	typ, data, err := c.ReadMessage(t.Context())
	if err != nil || typ != websocket.MessageText || string(data) != "over a pipe" {
		t.Fatalf("got %v %q %v", typ, data, err)
	}
}
