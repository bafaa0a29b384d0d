package relay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

func httpURL(s *relay.Server) string { return "http://" + s.Addr.String() }

func TestRelay_NIP11Document(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Name: "test relay", Description: "for tests", Version: "v1.2.3"})
	req, _ := http.NewRequest("GET", httpURL(s), nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/nostr+json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var doc struct {
		Name          string `json:"name"`
		Description   string `json:"description"`
		Software      string `json:"software"`
		Version       string `json:"version"`
		SupportedNIPs []int  `json:"supported_nips"`
		Limitation    struct {
			MaxMessageLength int `json:"max_message_length"`
			MaxSubscriptions int `json:"max_subscriptions"`
			MaxLimit         int `json:"max_limit"`
		} `json:"limitation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Name != "test relay" || doc.Description != "for tests" || doc.Version != "v1.2.3" || doc.Software == "" {
		t.Errorf("document = %+v", doc)
	}
	for _, nip := range []int{1, 9, 11, 40} {
		if !slices.Contains(doc.SupportedNIPs, nip) {
			t.Errorf("supported_nips %v lacks %d", doc.SupportedNIPs, nip)
		}
	}
	if doc.Limitation.MaxMessageLength < 100_000 || doc.Limitation.MaxSubscriptions == 0 || doc.Limitation.MaxLimit == 0 {
		t.Errorf("limitation = %+v", doc.Limitation)
	}
}

func TestRelay_StoredQueries(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	alice, bob := newIdentity(), newIdentity()
	now := nostr.Now()
	a1 := alice.signAt(t, 1, now-30, "a1", nostr.Tag{"t", "go"}, nostr.Tag{"i", "hash1", "echo"})
	a2 := alice.signAt(t, 1, now-20, "a2", nostr.Tag{"t", "rust"}, nostr.Tag{"k", "io.contextvm/common-schema"})
	b1 := bob.signAt(t, 7, now-10, "b1", nostr.Tag{"e", a1.ID.Hex()}, nostr.Tag{"p", alice.pk.Hex()})
	for _, e := range []nostr.Event{a1, a2, b1} {
		c.mustPublish(e)
	}

	tests := []struct {
		name   string
		filter nostr.Filter
		want   []nostr.Event // newest first
	}{
		{"ids", nostr.Filter{IDs: []nostr.ID{a2.ID}}, []nostr.Event{a2}},
		{"authors", nostr.Filter{Authors: []nostr.PubKey{alice.pk}}, []nostr.Event{a2, a1}},
		{"kinds", nostr.Filter{Kinds: []nostr.Kind{7}}, []nostr.Event{b1}},
		{"since", nostr.Filter{Since: now - 25}, []nostr.Event{b1, a2}},
		{"until", nostr.Filter{Until: now - 25}, []nostr.Event{a1}},
		{"limit", nostr.Filter{Limit: 2}, []nostr.Event{b1, a2}},
		{"#t", nostr.Filter{Tags: nostr.TagMap{"t": {"go"}}}, []nostr.Event{a1}},
		{"#i", nostr.Filter{Tags: nostr.TagMap{"i": {"hash1"}}}, []nostr.Event{a1}},
		{"#k", nostr.Filter{Tags: nostr.TagMap{"k": {"io.contextvm/common-schema"}}}, []nostr.Event{a2}},
		{"#e", nostr.Filter{Tags: nostr.TagMap{"e": {a1.ID.Hex()}}}, []nostr.Event{b1}},
		{"#p and kind", nostr.Filter{Kinds: []nostr.Kind{7}, Tags: nostr.TagMap{"p": {alice.pk.Hex()}}}, []nostr.Event{b1}},
		{"#p no match", nostr.Filter{Tags: nostr.TagMap{"p": {bob.pk.Hex()}}}, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.query("q"+strconv.Itoa(i), tt.filter)
			if !slices.Equal(ids(got), ids(tt.want)) {
				t.Errorf("got %v, want %v", ids(got), ids(tt.want))
			}
		})
	}
}

func TestRelay_LiveTagFilter(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	sub, pub := dial(t, s.URL), dial(t, s.URL)
	server, other, client := newIdentity(), newIdentity(), newIdentity()
	sub.query("live", nostr.Filter{Kinds: []nostr.Kind{25910, 1059, 21059}, Tags: nostr.TagMap{"p": {server.pk.Hex()}}, Since: nostr.Now()})

	pub.publish(client.sign(t, 25910, `{"n":1}`, nostr.Tag{"p", other.pk.Hex()})) // not for us: muted
	want := client.sign(t, 25910, `{"n":2}`, nostr.Tag{"p", server.pk.Hex()})
	pub.mustPublish(want)
	got, err := sub.nextEvent("live", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID {
		t.Fatalf("got event %s (%s), want the one addressed to the subscriber", got.ID, got.Content)
	}
	// A stored kind goes live too, and is filtered by #p the same way.
	pub.mustPublish(client.sign(t, 1059, "wrap-other", nostr.Tag{"p", other.pk.Hex()}))
	wrap := client.sign(t, 1059, "wrap-mine", nostr.Tag{"p", server.pk.Hex()})
	pub.mustPublish(wrap)
	if got, err := sub.nextEvent("live", 5*time.Second); err != nil || got.ID != wrap.ID {
		t.Fatalf("got %v %v, want the wrap addressed to the subscriber", got.Content, err)
	}
}

func TestRelay_EphemeralNotStored(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	sub, pub := dial(t, s.URL), dial(t, s.URL)
	id := newIdentity()

	// Nobody listening: valid but unheard.
	ok, reason := pub.publish(id.sign(t, 25910, "unheard"))
	if ok || !strings.HasPrefix(reason, "mute:") {
		t.Errorf("unheard ephemeral: ok=%v reason=%q, want false mute:", ok, reason)
	}

	sub.query("eph", nostr.Filter{Kinds: []nostr.Kind{25910}})
	evt := id.sign(t, 25910, "heard")
	pub.mustPublish(evt)
	if got, err := sub.nextEvent("eph", 5*time.Second); err != nil || got.ID != evt.ID {
		t.Fatalf("live delivery: %v %v", got.ID, err)
	}
	if got := pub.query("later", nostr.Filter{Kinds: []nostr.Kind{25910}}); len(got) != 0 {
		t.Errorf("ephemeral events were stored: %v", ids(got))
	}
}

func TestRelay_ReplaceableKeepsLatest(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	id := newIdentity()
	now := nostr.Now()

	v1 := id.signAt(t, 11316, now-10, "v1")
	v2 := id.signAt(t, 11316, now-5, "v2")
	stale := id.signAt(t, 11316, now-20, "stale")
	c.mustPublish(v1)
	c.mustPublish(v2)
	c.publish(stale) // arrives late; must not replace v2
	got := c.query("r", nostr.Filter{Kinds: []nostr.Kind{11316}, Authors: []nostr.PubKey{id.pk}})
	if len(got) != 1 || got[0].Content != "v2" {
		t.Fatalf("replaceable: got %d events %v, want only v2", len(got), got)
	}

	// Kind 0 and 3 are replaceable too, and another author's are independent.
	other := newIdentity()
	c.mustPublish(id.signAt(t, 0, now-3, `{"name":"a"}`))
	c.mustPublish(id.signAt(t, 0, now-2, `{"name":"b"}`))
	c.mustPublish(other.signAt(t, 0, now-1, `{"name":"z"}`))
	got = c.query("k0", nostr.Filter{Kinds: []nostr.Kind{0}})
	if len(got) != 2 {
		t.Fatalf("kind 0: got %d events, want one per author", len(got))
	}
}

func TestRelay_ReplaceableTieKeepsLowestID(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	id := newIdentity()
	at := nostr.Now() - 5
	a, b := id.signAt(t, 10002, at, "x"), id.signAt(t, 10002, at, "y")
	low := a
	if b.ID.Hex() < a.ID.Hex() {
		low = b
	}
	c.publish(a)
	c.publish(b)
	got := c.query("tie", nostr.Filter{Kinds: []nostr.Kind{10002}, Authors: []nostr.PubKey{id.pk}})
	if len(got) != 1 || got[0].ID != low.ID {
		t.Fatalf("tie: got %v, want the lowest id %s", ids(got), low.ID.Hex()[:8])
	}
}

func TestRelay_AddressableByDTag(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	id := newIdentity()
	now := nostr.Now()
	c.mustPublish(id.signAt(t, 30000, now-3, "a1", nostr.Tag{"d", "a"}))
	c.mustPublish(id.signAt(t, 30000, now-2, "b1", nostr.Tag{"d", "b"}))
	c.mustPublish(id.signAt(t, 30000, now-1, "a2", nostr.Tag{"d", "a"}))
	got := c.query("d", nostr.Filter{Kinds: []nostr.Kind{30000}})
	var contents []string
	for _, e := range got {
		contents = append(contents, e.Content)
	}
	if !slices.Equal(contents, []string{"a2", "b1"}) {
		t.Fatalf("addressable: got %v, want [a2 b1]", contents)
	}
}

func TestRelay_Deletion(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	alice, mallory := newIdentity(), newIdentity()
	note := alice.sign(t, 1, "to delete")
	c.mustPublish(note)

	ok, reason := c.publish(mallory.sign(t, 5, "", nostr.Tag{"e", note.ID.Hex()}))
	if ok || !strings.HasPrefix(reason, "blocked:") {
		t.Errorf("deletion by another author: ok=%v reason=%q", ok, reason)
	}
	if got := c.query("still", nostr.Filter{IDs: []nostr.ID{note.ID}}); len(got) != 1 {
		t.Fatal("someone else's deletion removed the event")
	}
	c.mustPublish(alice.sign(t, 5, "", nostr.Tag{"e", note.ID.Hex()}))
	if got := c.query("gone", nostr.Filter{IDs: []nostr.ID{note.ID}}); len(got) != 0 {
		t.Fatal("the author's deletion did not remove the event")
	}
}

// A deletion the relay refuses is neither stored nor delivered: only what
// the relay answers OK true exists for anyone else.
func TestRelay_RefusedDeletionIsNeitherStoredNorDelivered(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	watcher := dial(t, s.URL)
	watcher.query("dels", nostr.Filter{Kinds: []nostr.Kind{5}})
	alice, mallory := newIdentity(), newIdentity()
	note := alice.sign(t, 1, "not mallory's")
	c.mustPublish(note)

	del := mallory.sign(t, 5, "", nostr.Tag{"e", note.ID.Hex()})
	if ok, reason := c.publish(del); ok || !strings.HasPrefix(reason, "blocked:") {
		t.Fatalf("deletion by another author: ok=%v reason=%q", ok, reason)
	}
	// The broadcast, had there been one, was queued for the watcher before
	// the OK was: it arrives before the answer to the watcher's next REQ.
	for _, msg := range watcher.sync() {
		if label(msg) == "EVENT" {
			t.Fatalf("refused deletion delivered live: %s", msg)
		}
	}
	if got := c.query("del", nostr.Filter{IDs: []nostr.ID{del.ID}}); len(got) != 0 {
		t.Fatal("refused deletion is served by id")
	}
	if got := c.query("kind5", nostr.Filter{Kinds: []nostr.Kind{5}}); len(got) != 0 {
		t.Fatalf("refused deletion is served by kind: %v", ids(got))
	}
	if got := c.query("note", nostr.Filter{IDs: []nostr.ID{note.ID}}); len(got) != 1 {
		t.Fatal("the event named by the refused deletion is gone")
	}
}

// A deletion accepted (and stored) earlier is answered as a duplicate when
// sent again, even if it now names someone else's event: an event the
// relay holds is never answered OK false.
func TestRelay_ResentDeletionIsDuplicateNotRefused(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	alice, mallory := newIdentity(), newIdentity()
	note := alice.sign(t, 1, "published after the deletion")
	del := mallory.sign(t, 5, "", nostr.Tag{"e", note.ID.Hex()})
	c.mustPublish(del) // names nothing the relay has yet
	c.mustPublish(note)
	if ok, reason := c.publish(del); !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Fatalf("stored deletion sent again: ok=%v reason=%q, want duplicate", ok, reason)
	}
	if got := c.query("note", nostr.Filter{IDs: []nostr.ID{note.ID}}); len(got) != 1 {
		t.Fatal("the resent deletion removed someone else's event")
	}
}

// An "a" tag deletes every version of a replaceable event up to the
// request's created_at, and of an addressable event only the one with its d.
func TestRelay_DeletionByAddress(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	alice := newIdentity()
	list := alice.sign(t, 11317, `{"tools":[]}`)
	keep := alice.sign(t, 30023, "kept", nostr.Tag{"d", "keep"})
	drop := alice.sign(t, 30023, "dropped", nostr.Tag{"d", "drop"})
	for _, e := range []nostr.Event{list, keep, drop} {
		c.mustPublish(e)
	}
	c.mustPublish(alice.sign(t, 5, "",
		nostr.Tag{"a", "11317:" + alice.pk.Hex() + ":"},
		nostr.Tag{"a", "30023:" + alice.pk.Hex() + ":drop"}))
	if got := c.query("list", nostr.Filter{Kinds: []nostr.Kind{11317}, Authors: []nostr.PubKey{alice.pk}}); len(got) != 0 {
		t.Fatal("the replaceable event survived its deletion by address")
	}
	got := c.query("articles", nostr.Filter{Kinds: []nostr.Kind{30023}, Authors: []nostr.PubKey{alice.pk}})
	if len(got) != 1 || got[0].ID != keep.ID {
		t.Fatalf("addressable events after deleting one: %d", len(got))
	}
}

// NIP-40 expirations are in whole seconds: the test runs on a synctest
// clock, so that waiting past one takes no time and no wall-clock second
// boundary can make it flaky.
func TestRelay_Expiration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startPipeRelay(t, relay.Options{}).dial()
		id := newIdentity()
		now := time.Now()

		ok, reason := c.publish(id.sign(t, 1, "expired", nostr.Tag{"expiration", strconv.FormatInt(now.Add(-time.Minute).Unix(), 10)}))
		if ok || !strings.HasPrefix(reason, "invalid:") {
			t.Errorf("already-expired event: ok=%v reason=%q", ok, reason)
		}
		soon := id.sign(t, 1, "soon", nostr.Tag{"expiration", strconv.FormatInt(now.Add(2*time.Second).Unix(), 10)})
		c.mustPublish(soon)
		if got := c.query("before", nostr.Filter{IDs: []nostr.ID{soon.ID}}); len(got) != 1 {
			t.Fatal("event not served before its expiration")
		}
		time.Sleep(3 * time.Second) // synctest clock: past the expiration
		if got := c.query("after", nostr.Filter{IDs: []nostr.ID{soon.ID}}); len(got) != 0 {
			t.Fatal("event served after its expiration")
		}
	})
}

// khatru's NIP-40 sweeper reads through the relay's visibility filter,
// which hides expired events from everyone but khatru itself: after a
// restart its first scan must still find the events that expired while the
// relay was down, or they would stay stored forever.
func TestRelay_ExpiredEventsSweptAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := relay.Options{DBPath: filepath.Join(t.TempDir(), "events.db")}
		first := startPipeRelay(t, opts)
		id := newIdentity()
		first.dial().mustPublish(id.sign(t, 1, "soon", nostr.Tag{"expiration", strconv.FormatInt(time.Now().Add(2*time.Second).Unix(), 10)}))
		first.Relay.Close()

		time.Sleep(3 * time.Second) // synctest clock: it expires while the relay is down
		second := startPipeRelay(t, opts)
		mine := nostr.Filter{Authors: []nostr.PubKey{id.pk}}
		if n, _ := second.Store().CountEvents(mine); n != 1 {
			t.Fatalf("%d events stored after the restart, want the expired one", n)
		}
		time.Sleep(time.Hour + time.Second) // khatru's sweeper runs hourly
		synctest.Wait()
		if n, _ := second.Store().CountEvents(mine); n != 0 {
			t.Fatal("the expired event was not swept after the restart")
		}
	})
}

func TestRelay_FutureTimestampRejected(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	ok, reason := c.publish(newIdentity().signAt(t, 1, nostr.Now()+3600, "from the future"))
	if ok || !strings.HasPrefix(reason, "invalid:") {
		t.Errorf("ok=%v reason=%q", ok, reason)
	}
}

func TestRelay_GiftWrapRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startPipeRelay(t, relay.Options{GiftWrapTTL: 2 * time.Second})
		c := r.dial()
		sender, recipient := newIdentity(), newIdentity()
		p := nostr.Tag{"p", recipient.pk.Hex()}

		ok, reason := c.publish(sender.signAt(t, 1059, nostr.Now()-60, "old", p))
		if ok || !strings.HasPrefix(reason, "invalid:") {
			t.Errorf("wrap older than retention: ok=%v reason=%q", ok, reason)
		}
		wrap := sender.sign(t, 1059, "fresh", p)
		c.mustPublish(wrap)
		if got := c.query("now", nostr.Filter{Kinds: []nostr.Kind{1059}}); len(got) != 1 {
			t.Fatalf("fresh wrap not served: %v", ids(got))
		}
		// Past the retention the wrap is hidden at once, and the sweeper
		// (every TTL/4, at least a second) deletes it within a sweep.
		time.Sleep(3 * time.Second) // synctest clock: past the retention
		if got := c.query("later", nostr.Filter{Kinds: []nostr.Kind{1059}}); len(got) != 0 {
			t.Fatalf("expired wrap served: %v", ids(got))
		}
		time.Sleep(time.Second) // synctest clock: a sweep comes due
		synctest.Wait()         // the sweep that came due has run
		if n, _ := r.Store().CountEvents(nostr.Filter{Kinds: []nostr.Kind{1059}}); n != 0 {
			t.Fatal("expired gift wrap not deleted from storage by the sweeper")
		}
	})
}

func TestRelay_PersistsAcrossRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "relay.db")
	id := newIdentity()
	note := id.sign(t, 1, "durable")
	profile := id.sign(t, 0, `{"name":"x"}`)

	s, err := relay.Start("127.0.0.1:0", relay.Options{DBPath: db})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.URL)
	c.mustPublish(note)
	c.mustPublish(profile)
	c.close()
	s.Close()

	s2 := relaytest.Start(t, relay.Options{DBPath: db})
	got := dial(t, s2.URL).query("again", nostr.Filter{Authors: []nostr.PubKey{id.pk}})
	if !slices.Equal(ids(got), ids([]nostr.Event{profile, note})) && !slices.Equal(ids(got), ids([]nostr.Event{note, profile})) {
		t.Fatalf("after restart got %v, want both events", ids(got))
	}
}

func TestRelay_DatabaseInUseIsSaid(t *testing.T) {
	db := filepath.Join(t.TempDir(), "relay.db")
	relaytest.Start(t, relay.Options{DBPath: db})
	if _, err := relay.Start("127.0.0.1:0", relay.Options{DBPath: db}); !errors.Is(err, relay.ErrDatabaseLocked) || !strings.Contains(err.Error(), db) {
		t.Fatalf("a second relay on %s: %v; want ErrDatabaseLocked naming it", db, err)
	}
}

func TestRelay_MemoryStoreIsQueryable(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	evt := newIdentity().sign(t, 1, "in memory")
	c.mustPublish(evt)
	if got := dial(t, s.URL).query("m", nostr.Filter{IDs: []nostr.ID{evt.ID}}); len(got) != 1 {
		t.Fatal("memory store did not serve the event to another connection")
	}
}

func TestRelay_CloseSubscription(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	sub, pub := dial(t, s.URL), dial(t, s.URL)
	id := newIdentity()
	sub.query("s", nostr.Filter{Kinds: []nostr.Kind{1}})
	sub.send("CLOSE", "s")
	sub.sync() // this relay handles a connection's messages in order: the CLOSE has taken effect
	pub.mustPublish(id.sign(t, 1, "after close"))
	// The broadcast was queued for sub before pub got its OK, so it would
	// arrive before the answer to a request sub sends now.
	for _, msg := range sub.sync() {
		if label(msg) == "EVENT" && str(msg[1]) == "s" {
			t.Fatalf("event delivered on a closed subscription: %s", msg)
		}
	}
}

func TestRelay_Metrics(t *testing.T) {
	s := relaytest.Start(t, relay.Options{})
	c := dial(t, s.URL)
	c.mustPublish(newIdentity().sign(t, 1, "counted"))
	if v := metricValue(t, s, `cvm_relay_events_stored_total`); v != 1 {
		t.Errorf("events stored = %v, want 1", v)
	}
	if v := metricValue(t, s, `cvm_relay_connections`); v != 1 {
		t.Errorf("connections = %v, want 1", v)
	}
	resp, err := http.Get(httpURL(s) + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

// metricValue scrapes /metrics and returns the value of the first sample whose
// line starts with name (labels included in name if given).
func metricValue(t testing.TB, s *relay.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get(httpURL(s) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

// The relay verifies each event once, however many subscribers it goes to:
// the fan-out copies the frame, it does not check the signature again.
func TestRelay_VerifiesEachEventOnce(t *testing.T) {
	const subscribers, events = 5, 10
	s := relaytest.Start(t, relay.Options{})
	subs := make([]*wsClient, subscribers)
	for i := range subs {
		subs[i] = dial(t, s.URL)
		subs[i].query("s", nostr.Filter{Kinds: []nostr.Kind{25910}})
	}
	pub, id := dial(t, s.URL), newIdentity()
	for i := range events {
		pub.mustPublish(id.sign(t, 25910, fmt.Sprintf("call %d", i)))
	}
	for _, c := range subs {
		for range events {
			if _, err := c.nextEvent("s", 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v := metricValue(t, s, "cvm_relay_deliveries_total"); v != subscribers*events {
		t.Fatalf("deliveries = %v, want %d", v, subscribers*events)
	}
	if v := metricValue(t, s, "cvm_relay_signatures_checked_total"); v != events {
		t.Fatalf("signatures checked = %v for %d events to %d subscribers, want %d", v, events, subscribers, events)
	}
}
