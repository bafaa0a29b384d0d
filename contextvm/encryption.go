package contextvm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// How a client in optional encryption mode chooses between gift wraps and
// plaintext, and changes its mind. It sends gift wraps unless the server is
// known to read none. What it knows starts with what it is told
// (ClientOptions.KnownEncryption) or reads in the server's announcement, and
// is corrected by what the server's answers show: discovery tags, the form
// an answer comes in, a refusal (-32010, -32011). The reference server
// drops what its encryption mode refuses without a word, so a wrong belief
// shows only as silence; silence is what onSilence handles.

// ServerEncryption is what a client knows of whether its server reads gift
// wraps (CEP-4).
type ServerEncryption int

const (
	// EncryptionUnknown: nothing has said.
	EncryptionUnknown ServerEncryption = iota
	// EncryptionSupported: the server reads gift wraps. It says
	// support_encryption (in its announcement or discovery tags), or
	// answered one.
	EncryptionSupported
	// EncryptionUnsupported: the server reads no gift wraps. Its
	// discovery tags leave support_encryption out, or it refused or
	// dropped one.
	EncryptionUnsupported
)

func (e ServerEncryption) String() string {
	switch e {
	case EncryptionUnknown:
		return "unknown"
	case EncryptionSupported:
		return "supported"
	case EncryptionUnsupported:
		return "unsupported"
	}
	return fmt.Sprintf("ServerEncryption(%d)", int(e))
}

// form indexes serverView.heard: 0 for plaintext, 1 for gift wraps.
func form(wrapped bool) int {
	if wrapped {
		return 1
	}
	return 0
}

// encryption returns what is known of the server's encryption.
func (v *serverView) encryption() ServerEncryption {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.enc
}

// hint records what was said of the server before it answered anything
// (its announcement), unless something is known already.
func (v *serverView) hint(e ServerEncryption) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.enc == EncryptionUnknown {
		v.enc = e
	}
}

// setEncryption records what the server proved by refusing a form, or
// dropping it while it answered the other: it no longer counts as heard in
// the form it refuses.
func (v *serverView) setEncryption(e ServerEncryption) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.enc = e
	v.heard[form(e == EncryptionUnsupported)] = false
}

// answeredIn records that the server answered in a form: it reads it. An
// answer gift-wrapped says that it reads gift wraps.
func (v *serverView) answeredIn(wrapped bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.heard[form(wrapped)] = true
	if wrapped {
		v.enc = EncryptionSupported
	}
}

// reads reports whether the server answered in a form on this connection.
func (v *serverView) reads(wrapped bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.heard[form(wrapped)]
}

// plaintextCopyAnswered records that a request sent gift-wrapped, then in
// plaintext, was answered in plaintext: the server reads no gift wraps,
// unless it has said or shown that it does (a slow server answers both).
func (v *serverView) plaintextCopyAnswered() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.heard[1] && !(v.caps.known && v.caps.encryption) {
		v.enc = EncryptionUnsupported
	}
}

// giftWrapKind is the wrap kind of a message that is to be gift-wrapped.
func (v *serverView) giftWrapKind(wrap GiftWrapMode) nostr.Kind {
	v.mu.Lock()
	defer v.mu.Unlock()
	return wrapKindFor(wrap, v.caps.ephemeral, 0)
}

// lookupAnnouncement reads the server's CEP-6 announcement, if any, to learn
// whether it reads gift wraps before sending the first message.
func (c *clientConn) lookupAnnouncement(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.AnnouncementLookup)
	defer cancel()
	sub := c.pool.SubscribeFilters([]nostr.Filter{{Kinds: []nostr.Kind{KindServerAnnouncement}, Authors: []nostr.PubKey{c.server}, Limit: 1}}, 1)
	defer sub.Close()
	select {
	case evt := <-sub.Events():
		c.learnAnnouncement(evt)
	case <-sub.Ready():
		// Stored events come before EOSE, and may still be queued: both
		// cases can be ready at once.
		select {
		case evt := <-sub.Events():
			c.learnAnnouncement(evt)
		default:
		}
	case <-ctx.Done():
	case <-c.closed:
	}
}

// learnAnnouncement reads what the server's announcement says of its
// encryption.
func (c *clientConn) learnAnnouncement(evt nostr.Event) {
	caps, ok := learnCaps(evt.Tags)
	switch {
	case !ok:
	case caps.encryption:
		c.view.hint(EncryptionSupported)
	default:
		c.view.hint(EncryptionUnsupported)
		c.log.Debug("server announcement says it does not support encryption; using plaintext")
	}
}

// encryptionRefusal recognizes a cvm server's answer to a request in a
// form it will not open: wrapped says which form was refused.
func encryptionRefusal(m *jsonrpc.Response) (wrapped, ok bool) {
	var werr *jsonrpc.Error
	if !errors.As(m.Error, &werr) {
		return false, false
	}
	switch werr.Code {
	case CodeEncryptionNotAccepted:
		return true, true
	case CodeEncryptionRequired:
		return false, true
	}
	return false, false
}

// onSilence runs when p, sent in one event in optional mode, has waited
// PlaintextFallback for an answer. A server that answered in the form p
// went in is slow, and is left to answer. A request safe to repeat, sent
// gift-wrapped to a server nothing is known of, goes again in plaintext at
// once: the first contact with a server that has encryption disabled costs
// no more. Anything else is sent again only once the server has shown, by
// pings, that it dropped p unopened (probe).
func (c *clientConn) onSilence(ctx context.Context, p *pendingRequest) {
	switch {
	case !c.pending.isPending(p), c.view.reads(p.wrapped):
	case p.wrapped && repeatable(p.req.Method) && c.view.encryption() == EncryptionUnknown:
		c.sendOtherForm(ctx, p, false, "no answer to an encrypted request; trying plaintext in case the server has encryption disabled")
	default:
		c.probe(ctx, p)
	}
}

// minProbeGrace is the least time a ping in the form of the request is
// given to be answered after the ping in the other form was: both answers
// may be on their way, and they may cross.
const minProbeGrace = 500 * time.Millisecond

// probeOutcome is what the pings of a probe showed, for a timeout's
// message; 0 is no probe.
type probeOutcome int32

const (
	probeUnanswered probeOutcome = iota + 1 // no ping in the form of the request was answered
	probeAnswered                           // one was: the server is up and reads the request's form
)

// probe pings the server in the form p went in and in the other. Only if
// the server answers the other form's ping, and the one in p's form not
// within as long again (at least minProbeGrace), has it dropped p: then
// p was never opened, so it never ran, and it goes again in the other form
// whatever its method. A server that answers the ping in p's form is slow,
// not deaf, and p is left to it. To a server known to read gift wraps, the
// plaintext ping (which tells relays who is talking to whom) goes only
// after PlaintextFallback more without an answer to the wrapped one.
func (c *clientConn) probe(ctx context.Context, p *pendingRequest) {
	p.probe.Store(int32(probeUnanswered))
	same, err := c.ping(ctx, p.wrapped)
	if err != nil {
		c.log.Debug("probe not delivered", "err", err)
		return
	}
	defer c.probes.deleteIf(same.event, same)
	if p.wrapped && c.view.encryption() == EncryptionSupported && c.await(ctx, p, same, c.opts.PlaintextFallback) {
		return
	}
	if c.view.reads(p.wrapped) {
		return // it answered in p's form meanwhile (progress on p, say)
	}
	other, err := c.ping(ctx, !p.wrapped)
	if err != nil {
		c.log.Debug("probe not delivered", "err", err)
		return
	}
	defer c.probes.deleteIf(other.event, other)
	select {
	case <-same.answered:
		p.probe.Store(int32(probeAnswered))
		return
	case <-p.done:
		return
	case <-ctx.Done():
		return
	case <-other.answered:
	}
	if c.await(ctx, p, same, max(minProbeGrace, time.Since(other.sent))) {
		return
	}
	if p.wrapped {
		c.view.setEncryption(EncryptionUnsupported)
		c.sendOtherForm(ctx, p, false, "the server dropped a gift-wrapped request unopened (it answered a plaintext ping, not a gift-wrapped one): sending the request again in plaintext")
	} else {
		c.view.setEncryption(EncryptionSupported)
		c.sendOtherForm(ctx, p, true, "the server dropped a plaintext request unopened (it answered a gift-wrapped ping, not a plaintext one): sending the request again gift-wrapped")
	}
}

// await waits up to d for an answer to ping. It reports true when there
// is nothing more to find out: the ping was answered, or p is over.
func (c *clientConn) await(ctx context.Context, p *pendingRequest, ping *probePing, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ping.answered:
		p.probe.Store(int32(probeAnswered))
		return true
	case <-p.done:
		return true
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// probePing is a ping the transport sent of its own, to learn which form
// the server reads. Its answer is for the transport, never the go-sdk.
type probePing struct {
	event    nostr.ID
	sent     time.Time
	answered chan struct{} // closed by the answer, unless it is a refusal
}

// publishTimeout bounds the publishing of what the transport sends of its
// own accord (a probe, a request sent again): the request's own timeout
// still runs.
const publishTimeout = 5 * time.Second

// ping sends a ping, gift-wrapped or in plaintext, registered before its
// answer can arrive.
func (c *clientConn) ping(ctx context.Context, wrapped bool) (*probePing, error) {
	var b [8]byte
	rand.Read(b[:])
	id, err := jsonrpc.MakeID("cvm-probe-" + hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	content, err := EncodeContent(&jsonrpc.Request{ID: id, Method: mcpmsg.MethodPing})
	if err != nil {
		return nil, err
	}
	var wrapKind nostr.Kind
	if wrapped {
		wrapKind = c.view.giftWrapKind(c.opts.GiftWrap)
	}
	evt, out, err := c.seal(ctx, c.server, content, nostr.Tags{{"p", c.server.Hex()}}, wrapKind)
	if err != nil {
		return nil, err
	}
	ping := &probePing{event: evt.ID, sent: time.Now(), answered: make(chan struct{})}
	c.probes.put(evt.ID, ping)
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := c.pool.Publish(ctx, out); err != nil && !errors.Is(err, nostrx.ErrUnheard) {
		c.probes.deleteIf(evt.ID, ping)
		return nil, err
	}
	return ping, nil
}

// sendOtherForm sends p once more in the other form, gift-wrapped or in
// plaintext, for a server that dropped or refused its first form unopened
// (or, for a repeatable request, may have); why is logged for the user.
// In plaintext it leaves out the client's encryption flags.
func (c *clientConn) sendOtherForm(ctx context.Context, p *pendingRequest, wrapped bool, why string) {
	if !c.pending.isPending(p) || p.switched.Swap(true) {
		return
	}
	if p.fallback != nil {
		p.fallback.Stop()
	}
	c.log.Info(why, "method", p.req.Method)
	tags := p.tags
	var wrapKind nostr.Kind
	if wrapped {
		wrapKind = c.view.giftWrapKind(c.opts.GiftWrap)
	} else {
		tags = slices.DeleteFunc(slices.Clone(tags), func(t nostr.Tag) bool {
			return len(t) > 0 && (t[0] == TagSupportEncryption || t[0] == TagSupportEncryptionEphemeral)
		})
	}
	content, err := EncodeContent(p.wire)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if _, err := c.sendTracked(ctx, p, content, tags, wrapKind); err != nil && !errors.Is(err, nostrx.ErrUnheard) {
		c.log.Debug("request sent again not delivered", "err", err)
	}
}

// sentAs says how p went out, and what the server showed meanwhile, for
// the message of its timeout.
func (p *pendingRequest) sentAs() string {
	first, then := "in plaintext", "gift-wrapped"
	if p.wrapped {
		first, then = then, first
	}
	s := "sent " + first
	if p.switched.Load() {
		return s + ", then " + then
	}
	switch probeOutcome(p.probe.Load()) {
	case probeUnanswered:
		s += "; no ping was answered either"
	case probeAnswered:
		s += "; the server answered a ping meanwhile: it is up, and has not finished"
	}
	return s
}
