package relay_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

func TestRelay_BadInput(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	id := newIdentity()

	t.Run("invalid JSON", func(t *testing.T) {
		c.sendRaw(`["EVENT", {not json`)
		if msg := c.next(5 * time.Second); label(msg) != "NOTICE" {
			t.Fatalf("got %s, want NOTICE", msg)
		}
	})
	t.Run("unknown verb", func(t *testing.T) {
		c.sendRaw(`["PUBLISH", {}]`)
		if msg := c.next(5 * time.Second); label(msg) != "NOTICE" {
			t.Fatalf("got %s, want NOTICE", msg)
		}
	})
	t.Run("wrong id", func(t *testing.T) {
		evt := id.sign(t, 1, "x")
		evt.ID[0] ^= 0xff
		if ok, reason := c.publish(evt); ok || !strings.HasPrefix(reason, "invalid:") {
			t.Fatalf("ok=%v reason=%q", ok, reason)
		}
	})
	t.Run("bad signature", func(t *testing.T) {
		evt := id.sign(t, 1, "x")
		evt.Content = "tampered"
		evt.SetID()
		if ok, reason := c.publish(evt); ok || !strings.HasPrefix(reason, "invalid:") {
			t.Fatalf("ok=%v reason=%q", ok, reason)
		}
	})
	t.Run("connection survives bad input", func(t *testing.T) {
		c.mustPublish(id.sign(t, 1, "still fine"))
	})
}

func TestRelay_OversizedMessageClosesOnlyThatConnection(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{MaxMessageBytes: 4096}})
	bad, good := dial(t, s.URL), dial(t, s.URL)
	id := newIdentity()
	frame, _ := json.Marshal([]any{"EVENT", id.sign(t, 1, strings.Repeat("x", 8192))})
	// The relay may close before the client has finished writing, so the
	// write itself may fail; either way the connection must end, with 1009
	// when the close frame gets through.
	writeErr := bad.conn.Write(t.Context(), websocket.MessageText, frame)
	_, err := bad.nextErr(5 * time.Second)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("oversized frame: connection still open (read err %v)", err)
	}
	if status := websocket.CloseStatus(err); writeErr == nil && status != -1 && status != websocket.StatusMessageTooBig {
		t.Fatalf("oversized frame: close status %d, want 1009", status)
	}
	good.mustPublish(id.sign(t, 1, "small"))
}

func TestRelay_NIP44SizedGiftWrapFits(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	// A NIP-44 v2 payload of 65,535 plaintext bytes is 87,472 base64 bytes.
	wrap := newIdentity().sign(t, 1059, strings.Repeat("A", 87_472), nostr.Tag{"p", newIdentity().pk.Hex()})
	c.mustPublish(wrap)
}

func TestRelay_TooManySubscriptions(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{MaxSubscriptions: 2, MaxFilters: 3}})
	c := dial(t, s.URL)
	c.query("a", nostr.Filter{Kinds: []nostr.Kind{1}})
	c.query("b", nostr.Filter{Kinds: []nostr.Kind{1}})
	c.query("a", nostr.Filter{Kinds: []nostr.Kind{2}}) // replacing a subscription is always allowed

	c.send("REQ", "c", nostr.Filter{Kinds: []nostr.Kind{1}})
	msg := c.next(5 * time.Second)
	if label(msg) != "CLOSED" || str(msg[1]) != "c" || !strings.HasPrefix(str(msg[2]), "blocked:") {
		t.Fatalf("third subscription: got %s, want CLOSED blocked:", msg)
	}
	c.send("REQ", "b", nostr.Filter{Kinds: []nostr.Kind{1}}, nostr.Filter{Kinds: []nostr.Kind{2}}, nostr.Filter{Kinds: []nostr.Kind{3}})
	msg = c.next(5 * time.Second)
	if label(msg) != "CLOSED" || !strings.Contains(str(msg[2]), "filters") {
		t.Fatalf("fourth filter: got %s, want CLOSED about filters", msg)
	}
	c.send("CLOSE", "a")
	c.send("CLOSE", "b")
	// The relay handles a connection's messages in order: the CLOSEs have
	// taken effect when the next REQ is handled.
	c.query("c", nostr.Filter{Kinds: []nostr.Kind{1}}) // room again after CLOSE
}

func TestRelay_EventRateLimit(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: 0.001, EventBurst: 3}})
	c := dial(t, s.URL)
	id := newIdentity()
	for i := range 3 {
		c.mustPublish(id.sign(t, 1, fmt.Sprint(i)))
	}
	ok, reason := c.publish(id.sign(t, 1, "one too many"))
	if ok || !strings.HasPrefix(reason, "rate-limited:") {
		t.Fatalf("ok=%v reason=%q, want rate-limited:", ok, reason)
	}
}

func TestRelay_ConnectionRateLimit(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{ConnectionsPerSecond: 0.001, ConnectionBurst: 2}})
	dial(t, s.URL)
	dial(t, s.URL)
	c, resp, err := websocket.Dial(t.Context(), s.URL, nil)
	if err == nil {
		c.CloseNow()
	}
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connection: err=%v, want HTTP 429", err)
	}
	var body struct{ Error string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || !strings.HasPrefix(body.Error, "rate-limited:") {
		t.Fatalf("429 body: %+v %v, want a rate-limited: error", body, err)
	}
}

func TestRelay_ForwardedForIgnoredUnlessTrusted(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{ConnectionsPerSecond: 0.001, ConnectionBurst: 1}})
	dial(t, s.URL)
	h := http.Header{"X-Forwarded-For": {"203.0.113.7"}}
	if _, err := dialErr(s.URL, h); err == nil {
		t.Fatal("a spoofed X-Forwarded-For escaped the per-IP connection limit")
	}
}

func TestRelay_AuthGatesGiftWraps(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Auth: true})
	pub := dial(t, s.URL)
	alice, bob, sender := newIdentity(), newIdentity(), newIdentity()
	toAlice := sender.sign(t, 1059, "for alice", nostr.Tag{"p", alice.pk.Hex()})
	toBob := sender.sign(t, 1059, "for bob", nostr.Tag{"p", bob.pk.Hex()})
	pub.mustPublish(toAlice)
	pub.mustPublish(toBob)

	c := dial(t, s.URL)
	c.send("REQ", "w", nostr.Filter{Kinds: []nostr.Kind{1059}})
	var challenge string
	var closed bool
	for challenge == "" || !closed {
		msg := c.next(5 * time.Second)
		switch label(msg) {
		case "AUTH":
			challenge = str(msg[1])
		case "CLOSED":
			if !strings.HasPrefix(str(msg[2]), "auth-required:") {
				t.Fatalf("unauthenticated gift-wrap query: %s", msg)
			}
			closed = true
		case "EVENT":
			t.Fatalf("gift wrap served before authentication: %s", msg)
		}
	}

	auth := alice.sign(t, 22242, "", nostr.Tag{"relay", s.URL}, nostr.Tag{"challenge", challenge})
	c.send("AUTH", auth)
	if msg := c.next(5 * time.Second); label(msg) != "OK" || string(msg[2]) != "true" {
		t.Fatalf("AUTH: %s", msg)
	}
	got := c.query("w2", nostr.Filter{Kinds: []nostr.Kind{1059}})
	if len(got) != 1 || got[0].ID != toAlice.ID {
		t.Fatalf("authenticated as alice, got %v, want only alice's wrap", ids(got))
	}

	// Live: a new wrap for bob is not delivered to alice's subscription.
	pub.mustPublish(sender.sign(t, 1059, "bob again", nostr.Tag{"p", bob.pk.Hex()}))
	mine := sender.sign(t, 1059, "alice again", nostr.Tag{"p", alice.pk.Hex()})
	pub.mustPublish(mine)
	if evt, err := c.nextEvent("w2", 5*time.Second); err != nil || evt.ID != mine.ID {
		t.Fatalf("live: got %q %v, want alice's new wrap", evt.Content, err)
	}
}

// A subscriber that stops reading must not hold up publishers or other
// subscribers: it is dropped once its queue stays full.
func TestRelay_StalledSubscriberDoesNotDelayOthers(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{
		OutboundQueueBytes:  256 << 10, // 7 events: a reading subscriber's writer may wait a scheduling slice
		SlowConsumerTimeout: 200 * time.Millisecond,
		EventsPerSecond:     -1,
	}})
	stalled := dialStalled(t, s.URL, "all")
	defer stalled.Close()

	reader, pub := dial(t, s.URL), dial(t, s.URL)
	reader.query("all", nostr.Filter{Kinds: []nostr.Kind{1}})
	id := newIdentity()
	content := strings.Repeat("z", 32<<10)

	// Enough to fill the stalled reader's socket buffers and queue many times over.
	const n = 400
	done := make(chan error, 1)
	go func() {
		for range n {
			if _, err := reader.nextEvent("all", 10*time.Second); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		evt := id.sign(t, 1, fmt.Sprintf("%d %s", i, content))
		if ok, reason := pub.publish(evt); !ok {
			t.Fatalf("publish %d: %s", i, reason)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the reading subscriber missed events: %v", err)
	}
	if v := metricValue(t, s, "cvm_relay_slow_consumers_total"); v != 1 {
		t.Errorf("slow consumers dropped = %v, want 1", v)
	}
	// The relay has ended the stalled connection: reading what it had
	// sent ends.
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, stalled); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the stalled connection is still open")
	}
}

// A connection's own answers wait for room instead: a query larger than
// the outbound queue is paced by the client's reading, not refused.
func TestRelay_LargeQueryIsPacedNotDropped(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{OutboundQueueBytes: 4 << 10, EventsPerSecond: -1}})
	c := dial(t, s.URL)
	id := newIdentity()
	const n = 50 // 50 KiB of answers through a 4 KiB queue
	for i := range n {
		c.mustPublish(id.sign(t, 1, fmt.Sprintf("%d %s", i, strings.Repeat("q", 1000))))
	}
	if got := c.query("big", nostr.Filter{Kinds: []nostr.Kind{1}, Limit: n}); len(got) != n {
		t.Fatalf("query answered %d events, want %d", len(got), n)
	}
	if v := metricValue(t, s, "cvm_relay_slow_consumers_total"); v != 0 {
		t.Fatalf("slow consumers dropped = %v, want 0", v)
	}
}

// dialStalled opens a websocket by hand with a tiny receive buffer, so that
// the relay's writes back up fast, subscribes to kind 1 as sub, reads until
// the EOSE (the subscription is live), and never reads again.
func dialStalled(t *testing.T, url, sub string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(url, "ws://")
	d := net.Dialer{Control: nil}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(4096)
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		addr, base64.StdEncoding.EncodeToString(key))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	if _, err := conn.Write(maskedTextFrame([]byte(`["REQ","` + sub + `",{"kinds":[1]}]`))); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	eose := `["EOSE","` + sub + `"]`
	for {
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatalf("reading the answer to the REQ: %v", err)
		}
		if hdr[1] > 125 {
			t.Fatalf("unexpected frame of %#x bytes before the EOSE", hdr[1])
		}
		payload := make([]byte, hdr[1])
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatal(err)
		}
		if string(payload) == eose {
			return conn
		}
	}
}

func maskedTextFrame(payload []byte) []byte {
	var hdr []byte
	switch n := len(payload); {
	case n < 126:
		hdr = []byte{0x81, 0x80 | byte(n)}
	case n < 1<<16:
		hdr = []byte{0x81, 0x80 | 126, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], uint16(n))
	default:
		hdr = []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(hdr[2:], uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	out := append(hdr, mask...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	return out
}

func TestRelay_CloseDisconnectsClients(t *testing.T) {
	s, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.URL)
	c.query("x", nostr.Filter{Kinds: []nostr.Kind{1}})
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("Close did not return")
	}
	if _, err := c.nextErr(5 * time.Second); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("client still connected after Close: %v", err)
	}
}
