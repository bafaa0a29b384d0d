package relay_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// giftWrapFixture is a relay with Options.Auth holding a gift wrap for
// alice and one for bob, both from sender, and a public note from sender
// that tags alice.
type giftWrapFixture struct {
	s                   *relay.Server
	alice, bob, sender  identity
	toAlice, toBob, pub nostr.Event
}

func newGiftWrapFixture(t *testing.T) *giftWrapFixture {
	s := relaytest.Start(t, relay.Options{Auth: true})
	f := &giftWrapFixture{s: s, alice: newIdentity(), bob: newIdentity(), sender: newIdentity()}
	f.toAlice = f.sender.sign(t, 1059, "for alice", nostr.Tag{"p", f.alice.pk.Hex()})
	f.toBob = f.sender.sign(t, 1059, "for bob", nostr.Tag{"p", f.bob.pk.Hex()})
	f.pub = f.sender.sign(t, 1, "hello alice", nostr.Tag{"p", f.alice.pk.Hex()})
	c := dial(t, s.URL)
	for _, e := range []nostr.Event{f.toAlice, f.toBob, f.pub} {
		c.mustPublish(e)
	}
	return f
}

// COUNT answers with the number of events REQ would return to the same
// connection: gift wraps it may not read are not counted, whatever the
// filter names them by.
func TestRelay_CountSeesWhatReqSees(t *testing.T) {
	f := newGiftWrapFixture(t)
	eve := newIdentity()
	filters := []struct {
		name   string
		filter nostr.Filter
	}{
		{"#p", nostr.Filter{Tags: nostr.TagMap{"p": {f.alice.pk.Hex()}}}},
		{"ids", nostr.Filter{IDs: []nostr.ID{f.toAlice.ID, f.toBob.ID}}},
		{"authors", nostr.Filter{Authors: []nostr.PubKey{f.sender.pk}}},
		{"kinds", nostr.Filter{Kinds: []nostr.Kind{1059}}},
		{"kinds and #p", nostr.Filter{Kinds: []nostr.Kind{1059}, Tags: nostr.TagMap{"p": {f.alice.pk.Hex()}}}},
	}
	const refused = -1
	readers := []struct {
		name string
		as   *identity
		want []int // per filter; refused: CLOSED auth-required
	}{
		{"unauthenticated", nil, []int{1, 0, 1, refused, refused}},
		{"authenticated as someone else", &eve, []int{1, 0, 1, 0, 0}},
		{"authenticated as the recipient", &f.alice, []int{2, 1, 2, 1, 1}},
	}
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			c := dial(t, f.s.URL)
			if rd.as != nil {
				c.authenticate(*rd.as, f.s.URL)
			}
			for i, tt := range filters {
				t.Run(tt.name, func(t *testing.T) {
					req, reqClosed := c.reqCount(fmt.Sprint("r", i), tt.filter)
					n, approx, closed := c.count(fmt.Sprint("c", i), tt.filter)
					if rd.want[i] == refused {
						if !strings.HasPrefix(reqClosed, "auth-required:") || !strings.HasPrefix(closed, "auth-required:") {
							t.Fatalf("REQ closed %q, COUNT closed %q; want both auth-required", reqClosed, closed)
						}
						return
					}
					if reqClosed != "" || closed != "" {
						t.Fatalf("REQ closed %q, COUNT closed %q", reqClosed, closed)
					}
					if n != req || n != rd.want[i] || approx {
						t.Fatalf("COUNT = %d (approximate %v), REQ returned %d, want %d", n, approx, req, rd.want[i])
					}
				})
			}
		})
	}
}

// A COUNT refused for want of authentication comes with a challenge, as a
// REQ's does, so that a client knows to answer it.
func TestRelay_CountRefusalSendsChallenge(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Auth: true})
	c := dial(t, s.URL)
	if msg := c.next(5 * time.Second); label(msg) != "AUTH" {
		t.Fatalf("first frame %s, want AUTH", msg)
	}
	c.send("COUNT", "c", nostr.Filter{Kinds: []nostr.Kind{1059}})
	msg := c.next(5 * time.Second)
	if label(msg) != "AUTH" {
		t.Fatalf("got %s, want an AUTH challenge before CLOSED", msg)
	}
	if msg := c.next(5 * time.Second); label(msg) != "CLOSED" || !strings.HasPrefix(str(msg[2]), "auth-required:") {
		t.Fatalf("got %s, want CLOSED auth-required", msg)
	}
}

// COUNT does not count what queries hide by time: events past their NIP-40
// expiration and gift wraps past their retention, before the sweepers
// delete them.
func TestRelay_CountHidesExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Sweeps come every 10 minutes with this retention, and every hour
		// for NIP-40: the events outlive their visibility.
		const ttl = time.Hour
		r := startPipeRelay(t, relay.Options{GiftWrapTTL: ttl})
		c := r.dial()
		id, recipient := newIdentity(), newIdentity()
		exp := nostr.Tag{"expiration", strconv.FormatInt(time.Now().Add(2*time.Second).Unix(), 10)}
		c.mustPublish(id.sign(t, 1, "soon", exp))
		almostOld := nostr.Timestamp(time.Now().Add(-ttl + 2*time.Second).Unix())
		c.mustPublish(id.signAt(t, 1059, almostOld, "wrap", nostr.Tag{"p", recipient.pk.Hex()}))
		all := nostr.Filter{Authors: []nostr.PubKey{id.pk}}
		if n, _, _ := c.count("before", all); n != 2 {
			t.Fatalf("before expiry: count %d, want 2", n)
		}
		time.Sleep(3 * time.Second) // synctest clock: past both expiries
		if n, _ := r.Store().CountEvents(all); n != 2 {
			t.Fatalf("test is vacuous: %d of the events are still stored, want 2", n)
		}
		req, _ := c.reqCount("req", all)
		if n, _, _ := c.count("after", all); n != 0 || req != 0 {
			t.Fatalf("after expiry: COUNT %d, REQ %d, want 0", n, req)
		}
	})
}

// COUNT examines at most Limits.MaxCount events and says when it stopped
// short.
func TestRelay_CountApproximateBeyondLimit(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Limits: relay.Limits{MaxCount: 3}})
	c := dial(t, s.URL)
	id := newIdentity()
	for i := range 3 {
		c.mustPublish(id.sign(t, 1, strconv.Itoa(i)))
	}
	mine := nostr.Filter{Authors: []nostr.PubKey{id.pk}}
	if n, approx, _ := c.count("exact", mine); n != 3 || approx {
		t.Fatalf("3 events: count %d approximate %v, want exactly 3", n, approx)
	}
	c.mustPublish(id.sign(t, 1, "one more"))
	if n, approx, _ := c.count("over", mine); n != 3 || !approx {
		t.Fatalf("4 events: count %d approximate %v, want 3, approximate", n, approx)
	}
	if n, approx, _ := c.count("limit", nostr.Filter{Authors: []nostr.PubKey{id.pk}, Limit: 1}); n != 3 || !approx {
		t.Fatalf("a filter's limit bounds what REQ returns, not what COUNT counts: %d %v", n, approx)
	}
}

// A deletion request must not tell its author whether an event it may not
// read exists: naming someone else's hidden gift wrap is answered as naming
// nothing, and deletes nothing.
func TestRelay_DeletionDoesNotRevealHiddenEvents(t *testing.T) {
	f := newGiftWrapFixture(t)
	mallory := newIdentity()
	c := dial(t, f.s.URL)
	var missing nostr.ID
	missing[0] = 1
	okMissing, reasonMissing := c.publish(mallory.sign(t, 5, "", nostr.Tag{"e", missing.Hex()}))
	okHidden, reasonHidden := c.publish(mallory.sign(t, 5, "", nostr.Tag{"e", f.toAlice.ID.Hex()}))
	if okHidden != okMissing || reasonHidden != reasonMissing {
		t.Fatalf("naming a hidden wrap: %v %q; naming nothing: %v %q", okHidden, reasonHidden, okMissing, reasonMissing)
	}
	a := dial(t, f.s.URL)
	a.authenticate(f.alice, f.s.URL)
	if got := a.query("w", nostr.Filter{IDs: []nostr.ID{f.toAlice.ID}}); len(got) != 1 {
		t.Fatal("someone else's deletion removed alice's wrap")
	}
	// Visible to this connection, the same request is refused.
	if ok, reason := a.publish(mallory.sign(t, 5, "again", nostr.Tag{"e", f.toAlice.ID.Hex()})); ok || !strings.HasPrefix(reason, "blocked:") {
		t.Fatalf("deleting a wrap the connection can read: ok=%v reason=%q", ok, reason)
	}
}

// Publishing an event the relay holds but the publisher may not read is
// answered as a new event, not as a duplicate.
func TestRelay_DuplicateDoesNotRevealHiddenEvents(t *testing.T) {
	f := newGiftWrapFixture(t)
	c := dial(t, f.s.URL)
	if ok, reason := c.publish(f.toAlice); !ok || reason != "" {
		t.Fatalf("re-publishing a hidden wrap: ok=%v reason=%q, want the answer to a new event", ok, reason)
	}
	a := dial(t, f.s.URL)
	a.authenticate(f.alice, f.s.URL)
	if ok, reason := a.publish(f.toAlice); !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Fatalf("re-publishing as the recipient: ok=%v reason=%q, want duplicate", ok, reason)
	}
}
