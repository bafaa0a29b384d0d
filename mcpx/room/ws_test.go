package room_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

// The gateway frames data messages itself (internal/wsconn). Frames on
// each side of the length encodings' boundaries must reach a standard
// client intact. (wsconn's tests cover the framing; this is the gateway's
// path, envelope encoding included.)
func TestGateway_FramesOfEverySizeReachClientsIntact(t *testing.T) {
	g := gatewaytest.Start(t, room.Options{MaxFrameBytes: 1 << 20})
	a, _ := g.Join("room:x", "alice")
	for _, size := range []int{160, 65535, 65536, 65537, 300000} {
		e, pad := envelopeOfSize(t, size)
		a.SendRaw(strings.Replace(e, "PAD", pad, 1))
		m := a.Read()
		if len(m.Raw) != size {
			t.Fatalf("frame of %d bytes arrived as %d", size, len(m.Raw))
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

func TestGateway_PingsInterleaveWithBatchedFrames(t *testing.T) {
	// Control frames from the websocket library and batches from the
	// writer share the socket; neither may cut into the other.
	g := gatewaytest.Start(t, room.Options{HeartbeatInterval: 2 * time.Millisecond, PongTimeout: 5 * time.Second})
	a, _ := g.Join("room:x", "alice")
	b, _ := g.Join("room:x", "bob")
	const n = 300
	go func() {
		for i := 0; i < n; i++ {
			a.Send(a.Env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`, i)))
		}
	}()
	for _, c := range []*gatewaytest.Client{a, b} {
		got := 0
		for got < n {
			m := c.Read()
			if m.Kind == mcpx.KindPresence && m.Event() == mcpx.PresenceLeave {
				t.Fatalf("%s saw a leave: %s", c.ID, m)
			}
			if m.Kind == mcpx.KindMCP {
				got++
			}
		}
	}
}
