package peertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
)

// RawPeer speaks ContextVM by hand: it signs and publishes events of its
// choosing and collects what comes back, to test what a well-behaved client
// would never send.
type RawPeer struct {
	t    testing.TB
	SK   nostr.SecretKey
	Pool *nostrx.Pool
	Sub  *nostrx.Subscription
}

// NewRawPeer is a peer with a fresh key on relayURL, subscribed to what
// is addressed to it, closed when the test ends.
func NewRawPeer(t testing.TB, relayURL string) *RawPeer {
	return NewRawPeerWithKey(t, relayURL, nostr.Generate())
}

// NewRawPeerWithKey is NewRawPeer with the key sk: the same client come
// back after it went away (its Pool closed).
func NewRawPeerWithKey(t testing.TB, relayURL string, sk nostr.SecretKey) *RawPeer {
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	sub := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage, contextvm.KindGiftWrap, contextvm.KindEphemeralGiftWrap}, Tags: nostr.TagMap{"p": {sk.Public().Hex()}}}, 0)
	<-sub.Ready()
	t.Cleanup(func() { pool.Close() })
	return &RawPeer{t: t, SK: sk, Pool: pool, Sub: sub}
}

// Message signs content as a kind 25910 event to server.
func (p *RawPeer) Message(server nostr.PubKey, content string, tags ...nostr.Tag) nostr.Event {
	evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Content: content, Tags: append(nostr.Tags{{"p", server.Hex()}}, tags...)}
	if err := evt.Sign(p.SK); err != nil {
		p.t.Fatal(err)
	}
	return evt
}

// MessageAt is Message dated at.
func (p *RawPeer) MessageAt(at nostr.Timestamp, to nostr.PubKey, content string, tags ...nostr.Tag) nostr.Event {
	evt := p.Message(to, content, tags...)
	evt.CreatedAt = at
	if err := evt.Sign(p.SK); err != nil {
		p.t.Fatal(err)
	}
	return evt
}

// Publish publishes evt; a relay with no listener for it is no failure.
func (p *RawPeer) Publish(evt nostr.Event) {
	p.t.Helper()
	ctx, cancel := testwait.Context(p.t, 5*time.Second)
	defer cancel()
	if err := p.Pool.Publish(ctx, evt); err != nil && !errors.Is(err, nostrx.ErrUnheard) {
		p.t.Fatal(err)
	}
}

// Next returns the next message addressed to the peer, unwrapped, within d.
func (p *RawPeer) Next(d time.Duration) (nostr.Event, bool) {
	select {
	case evt, ok := <-p.Sub.Events():
		if !ok {
			return nostr.Event{}, false // the peer is closed: its test is over
		}
		if evt.Kind != contextvm.KindMessage {
			inner, err := contextvm.Unwrap(context.Background(), contextvm.NewKeySigner(p.SK), p.SK.Public(), evt)
			if err != nil {
				p.t.Errorf("unwrap: %v", err)
				return nostr.Event{}, false
			}
			return inner, true
		}
		return evt, true
	case <-time.After(testwait.Timeout(d)):
		return nostr.Event{}, false
	}
}

// Initialize begins a session with server: initialize, its answer, and
// notifications/initialized.
func (p *RawPeer) Initialize(server nostr.PubKey) {
	p.t.Helper()
	p.Publish(p.Message(server, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	if _, ok := p.Next(10 * time.Second); !ok {
		p.t.Fatal("no initialize response")
	}
	p.Publish(p.Message(server, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// NextMessage reads the next message of the peer, within ten seconds, as
// a JSON object.
func NextMessage(t *testing.T, p *RawPeer) (nostr.Event, map[string]json.RawMessage) {
	t.Helper()
	evt, ok := p.Next(10 * time.Second)
	if !ok {
		t.Fatal("no message from the server")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(evt.Content), &m); err != nil {
		t.Fatal(err)
	}
	return evt, m
}

// Method is the method of a message read by NextMessage, "" for none.
func Method(m map[string]json.RawMessage) string {
	var s string
	json.Unmarshal(m["method"], &s)
	return s
}

// FirstTag is the value of the first tag named name.
func FirstTag(tags nostr.Tags, name string) (string, bool) {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == name {
			return t[1], true
		}
	}
	return "", false
}

// BigText is n bytes or more of text whose escaping and code points make
// the frame arithmetic work: quotes, backslashes, emoji.
func BigText(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(`line "quoted" \ back 🌍 naïve <&> `)
	}
	return b.String()
}

// RawTransfer sends msg from peer to the server as CEP-22 frames, letting
// mangle change them on the way (or drop one: false).
func RawTransfer(t *testing.T, peer *RawPeer, server nostr.PubKey, msg string, mangle func(i int, frame map[string]any) bool) {
	t.Helper()
	const chunk = 1000
	var chunks []string
	for i := 0; i < len(msg); i += chunk {
		chunks = append(chunks, msg[i:min(i+chunk, len(msg))])
	}
	send := func(i int, cvm map[string]any, progress int) {
		frame := map[string]any{"progressToken": "raw", "progress": progress, "cvm": cvm}
		if mangle != nil && !mangle(i, frame) {
			return
		}
		params, _ := json.Marshal(frame)
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": json.RawMessage(params)})
		peer.Publish(peer.Message(server, string(body), nostr.Tag{"nonce", time.Now().String()}))
	}
	digest := "sha256:" + SHA256Hex(msg)
	send(0, map[string]any{"type": "oversized-transfer", "frameType": "start", "completionMode": "render",
		"digest": digest, "totalBytes": len(msg), "totalChunks": len(chunks)}, 1)
	for i, c := range chunks {
		send(i+1, map[string]any{"type": "oversized-transfer", "frameType": "chunk", "data": c}, 2+i)
	}
	send(len(chunks)+1, map[string]any{"type": "oversized-transfer", "frameType": "end"}, 2+len(chunks))
}

// SHA256Hex is the hex sha256 of s.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// JSONInt is i as JSON.
func JSONInt(i int) string { b, _ := json.Marshal(i); return string(b) }
