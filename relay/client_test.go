package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
)

// wsClient is a deliberately raw NIP-01 client: the conformance tests speak
// JSON frames so that they test the wire, not a client library's view of it.
type wsClient struct {
	t     testing.TB
	conn  *websocket.Conn
	syncs int
}

func dial(t testing.TB, url string) *wsClient {
	t.Helper()
	c, err := dialErr(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, conn: c}
}

func dialErr(url string, header http.Header) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(10*time.Second))
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(16 << 20)
	return c, nil
}

func (c *wsClient) close() { c.conn.Close(websocket.StatusNormalClosure, "") }

func (c *wsClient) sendRaw(frame string) {
	c.t.Helper()
	ctx, cancel := testwait.Context(c.t, 10*time.Second)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *wsClient) send(v ...any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// next returns the next frame as a JSON array, failing the test after d.
func (c *wsClient) next(d time.Duration) []json.RawMessage {
	c.t.Helper()
	msg, err := c.nextErr(d)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return msg
}

// nextErr returns the next frame, or an error when none comes within d
// (scaled, testwait.Timeout).
func (c *wsClient) nextErr(d time.Duration) ([]json.RawMessage, error) {
	ctx, cancel := testwait.Context(c.t, d)
	defer cancel()
	return c.read(ctx)
}

func (c *wsClient) read(ctx context.Context) ([]json.RawMessage, error) {
	_, b, err := c.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	var msg []json.RawMessage
	if err := json.Unmarshal(b, &msg); err != nil {
		return nil, fmt.Errorf("frame is not a JSON array: %s", b)
	}
	return msg, nil
}

func label(msg []json.RawMessage) string {
	var s string
	json.Unmarshal(msg[0], &s)
	return s
}

func str(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// publish sends evt and returns the relay's OK verdict and reason.
func (c *wsClient) publish(evt nostr.Event) (bool, string) {
	c.t.Helper()
	c.send("EVENT", evt)
	for {
		msg := c.next(5 * time.Second)
		if label(msg) != "OK" {
			continue // events for other subscriptions may interleave
		}
		if str(msg[1]) != evt.ID.Hex() {
			c.t.Fatalf("OK for %s, want %s", msg[1], evt.ID.Hex())
		}
		var ok bool
		json.Unmarshal(msg[2], &ok)
		return ok, str(msg[3])
	}
}

func (c *wsClient) mustPublish(evt nostr.Event) {
	c.t.Helper()
	if ok, reason := c.publish(evt); !ok {
		c.t.Fatalf("publish kind %d rejected: %s", evt.Kind, reason)
	}
}

// query runs a REQ and returns the stored events until EOSE, leaving the
// subscription open.
func (c *wsClient) query(sub string, filters ...nostr.Filter) []nostr.Event {
	c.t.Helper()
	args := []any{"REQ", sub}
	for _, f := range filters {
		args = append(args, f)
	}
	c.send(args...)
	var events []nostr.Event
	for {
		msg := c.next(5 * time.Second)
		switch label(msg) {
		case "EVENT":
			if str(msg[1]) != sub {
				continue
			}
			var evt nostr.Event
			if err := json.Unmarshal(msg[2], &evt); err != nil {
				c.t.Fatalf("bad event: %v", err)
			}
			events = append(events, evt)
		case "EOSE":
			return events
		case "CLOSED":
			c.t.Fatalf("subscription %s closed: %s", sub, msg[2])
		}
	}
}

// sync sends a request that matches nothing and returns every frame that
// arrived before its answer. The relay handles a connection's messages in
// order and writes its frames in order, so everything the relay did for
// earlier messages of this connection has then taken effect, and every
// frame it queued for the connection before has arrived.
func (c *wsClient) sync() [][]json.RawMessage {
	c.t.Helper()
	c.syncs++
	sub := fmt.Sprintf("sync-%d", c.syncs)
	c.send("REQ", sub, nostr.Filter{IDs: []nostr.ID{{}}})
	var before [][]json.RawMessage
	for {
		msg := c.next(5 * time.Second)
		if label(msg) == "EOSE" && str(msg[1]) == sub {
			return before
		}
		before = append(before, msg)
	}
}

// nextEvent waits for a live event on sub.
func (c *wsClient) nextEvent(sub string, d time.Duration) (nostr.Event, error) {
	ctx, cancel := testwait.Context(c.t, d)
	defer cancel()
	for {
		msg, err := c.read(ctx)
		if err != nil {
			return nostr.Event{}, err
		}
		if label(msg) == "EVENT" && str(msg[1]) == sub {
			var evt nostr.Event
			err := json.Unmarshal(msg[2], &evt)
			return evt, err
		}
	}
}

type identity struct {
	sk nostr.SecretKey
	pk nostr.PubKey
}

func newIdentity() identity {
	sk := nostr.Generate()
	return identity{sk: sk, pk: sk.Public()}
}

func (id identity) sign(t testing.TB, kind nostr.Kind, content string, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	return id.signAt(t, kind, nostr.Now(), content, tags...)
}

func (id identity) signAt(t testing.TB, kind nostr.Kind, at nostr.Timestamp, content string, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	evt := nostr.Event{Kind: kind, CreatedAt: at, Content: content, Tags: nostr.Tags(tags)}
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	if err := evt.Sign(id.sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

func ids(events []nostr.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID.Hex()[:8]
	}
	return out
}

// reqCount runs a REQ and returns how many stored events it got, or the
// CLOSED reason; the subscription is closed again.
func (c *wsClient) reqCount(sub string, f nostr.Filter) (n int, closed string) {
	c.t.Helper()
	c.send("REQ", sub, f)
	defer c.send("CLOSE", sub)
	for {
		msg := c.next(5 * time.Second)
		if len(msg) < 2 || str(msg[1]) != sub {
			continue
		}
		switch label(msg) {
		case "EVENT":
			n++
		case "EOSE":
			return n, ""
		case "CLOSED":
			return 0, str(msg[2])
		}
	}
}

// count runs a COUNT and returns its answer, or the CLOSED reason.
func (c *wsClient) count(sub string, f nostr.Filter) (n int, approximate bool, closed string) {
	c.t.Helper()
	c.send("COUNT", sub, f)
	for {
		msg := c.next(5 * time.Second)
		if len(msg) < 3 || str(msg[1]) != sub {
			continue
		}
		switch label(msg) {
		case "COUNT":
			var body struct {
				Count       *int `json:"count"`
				Approximate bool `json:"approximate"`
			}
			if err := json.Unmarshal(msg[2], &body); err != nil || body.Count == nil {
				c.t.Fatalf("bad COUNT answer: %s", msg[2])
			}
			return *body.Count, body.Approximate, ""
		case "CLOSED":
			return 0, false, str(msg[2])
		}
	}
}

// authenticate answers the challenge a relay with Options.Auth sends on
// connecting, as id.
func (c *wsClient) authenticate(id identity, url string) {
	c.t.Helper()
	msg := c.next(5 * time.Second)
	if label(msg) != "AUTH" {
		c.t.Fatalf("first frame %s, want an AUTH challenge", msg)
	}
	c.send("AUTH", id.sign(c.t, 22242, "", nostr.Tag{"relay", url}, nostr.Tag{"challenge", str(msg[1])}))
	if msg := c.next(5 * time.Second); label(msg) != "OK" || string(msg[2]) != "true" {
		c.t.Fatalf("AUTH: %s", msg)
	}
}
