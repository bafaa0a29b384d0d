package social

import (
	"context"
	"testing"

	"fiatjaf.com/nostr"
)

func TestThreads_NestsRepliesAndKeepsOrphans(t *testing.T) {
	top := Review{ID: nostr.ID{1}, Server: testServer}
	reply := Review{ID: nostr.ID{2}, Server: testServer, Parent: top.ID}
	deeper := Review{ID: nostr.ID{3}, Server: testServer, Parent: reply.ID}
	orphan := Review{ID: nostr.ID{4}, Server: testServer, Parent: nostr.ID{99}}
	self := Review{ID: nostr.ID{5}, Server: testServer, Parent: nostr.ID{5}}
	th := Threads([]Review{top, reply, deeper, orphan, self})
	if len(th) != 3 || th[0].ID != top.ID || th[1].ID != orphan.ID || th[2].ID != self.ID {
		t.Fatalf("roots %+v", th)
	}
	if len(th[0].Replies) != 1 || th[0].Replies[0].ID != reply.ID || len(th[0].Replies[0].Replies) != 1 || th[0].Replies[0].Replies[0].ID != deeper.ID {
		t.Fatalf("thread %+v", th[0])
	}
}

// TestThreads_BoundsDepth: a chain of replies far deeper than any person
// writes is shown flattened at the bound, every reply once.
func TestThreads_BoundsDepth(t *testing.T) {
	var chain []Review
	for i := range 1000 {
		r := Review{ID: nostr.ID{byte(i), byte(i >> 8), 1}, Server: testServer}
		if i > 0 {
			r.Parent = chain[i-1].ID
		}
		chain = append(chain, r)
	}
	th := Threads(chain)
	depth, count := 0, 0
	var walk func(ts []Thread, d int)
	walk = func(ts []Thread, d int) {
		for _, t := range ts {
			count++
			depth = max(depth, d)
			walk(t.Replies, d+1)
		}
	}
	walk(th, 0)
	if depth > maxThreadDepth || count < maxThreadDepth {
		t.Fatalf("depth %d, %d reviews shown", depth, count)
	}
}

// fakeRelay is a Publisher over a slice of events, for unit tests.
type fakeRelay struct{ events []nostr.Event }

func (f *fakeRelay) Query(_ context.Context, filter nostr.Filter) ([]nostr.Event, error) {
	var out []nostr.Event
	for _, ev := range f.events {
		if filter.Matches(ev) {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (f *fakeRelay) Publish(_ context.Context, ev nostr.Event) error {
	f.events = append(f.events, ev)
	return nil
}

type keySigner struct{ sk nostr.SecretKey }

func (k keySigner) GetPublicKey(context.Context) (nostr.PubKey, error) { return k.sk.Public(), nil }
func (k keySigner) SignEvent(_ context.Context, ev *nostr.Event) error { return ev.Sign(k.sk) }

func TestPublishProfile_OnlyWhenChanged(t *testing.T) {
	ctx := context.Background()
	relay := &fakeRelay{}
	s := keySigner{nostr.Generate()}
	p := Profile{Name: "one"}
	for i, want := range []bool{true, false} {
		if got, err := PublishProfile(ctx, relay, s, p); err != nil || got != want {
			t.Fatalf("publish %d: %v, %v; want %v", i, got, err, want)
		}
	}
	p.Name = "two"
	if got, err := PublishProfile(ctx, relay, s, p); err != nil || !got {
		t.Fatalf("changed profile: %v, %v", got, err)
	}
	if relay.events[1].CreatedAt <= relay.events[0].CreatedAt {
		t.Errorf("the new profile does not replace the old: %d <= %d", relay.events[1].CreatedAt, relay.events[0].CreatedAt)
	}
	got, err := Fetch(ctx, relay, []nostr.PubKey{s.sk.Public()}, FetchOptions{})
	if err != nil || got[s.sk.Public()].Profile.Name != "two" {
		t.Fatalf("fetched %+v, %v", got[s.sk.Public()], err)
	}
}

func TestFetch_FilesReviewsAndSkipsBadOnes(t *testing.T) {
	ctx := context.Background()
	author := nostr.Generate()
	sign := func(ev nostr.Event) nostr.Event { ev.Sign(author); return ev }
	good, _ := ReviewDraft{Server: testServer, Rating: 5, Content: "good"}.Event()
	bad := nostr.Event{Kind: nostr.KindComment, Tags: nostr.Tags{{"A", ServerAddress(testServer)}, {"K", "11316"}, {"k", "11316"}, {"rating", "9"}}}
	note := NoteEvent("hello")
	relay := &fakeRelay{events: []nostr.Event{sign(good), sign(bad), sign(note)}}
	got, err := Fetch(ctx, relay, []nostr.PubKey{testServer}, FetchOptions{Reviews: true, Notes: 3})
	pr := got[testServer]
	if err != nil || len(pr.Reviews) != 1 || pr.Reviews[0].Rating != 5 || pr.Skipped != 1 || len(pr.Notes) != 0 {
		t.Fatalf("presence %+v, %v", pr, err)
	}
}

// countingRelay counts the queries and the keys each names.
type countingRelay struct {
	fakeRelay
	keys []int
}

func (c *countingRelay) Query(ctx context.Context, f nostr.Filter) ([]nostr.Event, error) {
	c.keys = append(c.keys, len(f.Authors)+len(f.Tags["A"]))
	return c.fakeRelay.Query(ctx, f)
}

// TestFetch_ChunksKeysAndBoundsEvents: many keys go in several small
// queries, and a relay answering with more events than asked is read up
// to the bound.
func TestFetch_ChunksKeysAndBoundsEvents(t *testing.T) {
	keys := make([]nostr.PubKey, 250)
	for i := range keys {
		keys[i] = nostr.Generate().Public()
	}
	c := &countingRelay{}
	if _, err := Fetch(context.Background(), c, keys, FetchOptions{Reviews: true, Notes: 1}); err != nil {
		t.Fatal(err)
	}
	if len(c.keys) != 9 || c.keys[0] != keysPerQuery || c.keys[2] != 50 {
		t.Fatalf("queries naming %v keys", c.keys)
	}
	flood := &fakeRelay{}
	sk := nostr.Generate()
	for range 50 {
		ev := NoteEvent("x")
		ev.Sign(sk)
		flood.events = append(flood.events, ev)
	}
	got, _ := Fetch(context.Background(), flood, []nostr.PubKey{sk.Public()}, FetchOptions{Notes: 100, MaxEvents: 10})
	if n := len(got[sk.Public()].Notes); n != 10 {
		t.Fatalf("%d notes read with MaxEvents 10", n)
	}
}
