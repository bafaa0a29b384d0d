package room

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/mcpx"
)

func TestOutQueue_BoundsByFramesAndBytes(t *testing.T) {
	q := newOutQueue(3, 100)
	if !q.push(make([]byte, 500)) {
		t.Fatal("a single frame larger than the byte bound must fit an empty queue")
	}
	if q.push(make([]byte, 1)) {
		t.Fatal("pushed past the byte bound")
	}
	if got := q.take(nil); len(got) != 1 {
		t.Fatalf("took %d frames", len(got))
	}
	for i := 0; i < 3; i++ {
		if !q.push([]byte("x")) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.push([]byte("x")) {
		t.Fatal("pushed past the frame bound")
	}
	q.take(nil)
	q.close()
	if !q.push(make([]byte, 1000)) {
		t.Fatal("a closed queue must swallow pushes, not report a slow consumer")
	}
	if got := q.take(nil); len(got) != 0 {
		t.Fatalf("a closed queue kept %d frames", len(got))
	}
}

// The gateway frames data messages itself (frameConn.WriteFrames). Frames
// on each side of the length encodings' boundaries must reach a standard
// client intact.
func TestGateway_FramesOfEverySizeReachClientsIntact(t *testing.T) {
	g := startGateway(t, Options{MaxFrameBytes: 1 << 20})
	a, _ := g.join("room:x", "alice")
	for _, size := range []int{160, 65535, 65536, 65537, 300000} {
		e, pad := envelopeOfSize(t, size)
		a.sendRaw(strings.Replace(e, "PAD", pad, 1))
		m := a.read()
		if len(m.raw) != size {
			t.Fatalf("frame of %d bytes arrived as %d", size, len(m.raw))
		}
		if !strings.Contains(string(m.Payload), pad) {
			t.Fatalf("payload of the %d-byte frame changed", size)
		}
	}
}

// envelopeOfSize returns an envelope template (with PAD to replace) whose
// forwarded encoding is exactly size bytes, and the pad.
func envelopeOfSize(t *testing.T, size int) (string, string) {
	t.Helper()
	tmpl := `{"protocol":"mcp-x/v0","id":"sz","ts":"2025-08-17T14:00:00Z","from":"alice","kind":"mcp","payload":{"jsonrpc":"2.0","method":"n","params":{"p":"PAD"}}}`
	for n := 0; n <= size; n++ {
		pad := strings.Repeat("x", n)
		e, _, err := mcpx.DecodeEnvelope([]byte(strings.Replace(tmpl, "PAD", pad, 1)))
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = 1 // the test sends fewer than ten envelopes: seq has one digit
		if l := len(e.AppendJSON(nil)); l == size {
			return tmpl, pad
		} else if l > size {
			break
		} else {
			n += max(size-l, 1) - 1
		}
	}
	t.Fatalf("no pad makes a %d-byte frame", size)
	return "", ""
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

func TestGateway_PingsInterleaveWithBatchedFrames(t *testing.T) {
	// Control frames from the websocket library and batches from the
	// writer share the socket; neither may cut into the other.
	g := startGateway(t, Options{HeartbeatInterval: 2 * time.Millisecond, PongTimeout: 5 * time.Second})
	a, _ := g.join("room:x", "alice")
	b, _ := g.join("room:x", "bob")
	const n = 300
	go func() {
		for i := 0; i < n; i++ {
			a.send(a.env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`, i)))
		}
	}()
	for _, c := range []*client{a, b} {
		got := 0
		for got < n {
			m := c.read()
			if m.Kind == mcpx.KindPresence && m.event() == mcpx.PresenceLeave {
				t.Fatalf("%s saw a leave: %s", c.id, m)
			}
			if m.Kind == mcpx.KindMCP {
				got++
			}
		}
	}
}
