package reputation_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/reputation"
)

func keys(n int) []nostr.SecretKey {
	out := make([]nostr.SecretKey, n)
	for i := range out {
		out[i] = nostr.Generate()
	}
	return out
}

func publics(sks []nostr.SecretKey) []nostr.PubKey {
	out := make([]nostr.PubKey, len(sks))
	for i, sk := range sks {
		out[i] = sk.Public()
	}
	return out
}

func TestNewWeb_Weights(t *testing.T) {
	root, friend, fof, stranger := nostr.Generate().Public(), nostr.Generate().Public(), nostr.Generate().Public(), nostr.Generate().Public()
	w := reputation.NewWeb(
		reputation.FollowList{Author: root, Follows: []nostr.PubKey{friend, root}},
		[]reputation.FollowList{
			{Author: friend, Follows: []nostr.PubKey{fof, root, friend}},
			{Author: stranger, Follows: []nostr.PubKey{stranger}}, // not followed: ignored
		})
	for _, c := range []struct {
		name string
		pk   nostr.PubKey
		want float64
	}{{"root", root, 1}, {"follow", friend, 1}, {"follow of follow", fof, 0.25}, {"stranger", stranger, 0}} {
		if got := w.Weight(c.pk); got != c.want {
			t.Errorf("%s: weight %v, want %v", c.name, got, c.want)
		}
	}
	if f, s := w.Size(); f != 1 || s != 1 {
		t.Errorf("size %d, %d; want 1, 1", f, s)
	}
}

// The web is read from a real relay: the root's list, then its follows'
// lists, and cached for the next run.
func TestFetchWeb_FromTheRelayAndCached(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	p := newPool(t, r)
	root := nostr.Generate()
	follows := keys(150) // two queries of follows' lists
	fofs := publics(keys(300))
	var evts []nostr.Event
	evts = append(evts, followList(t, root, 100, publics(follows)...))
	for i, f := range follows {
		evts = append(evts, followList(t, f, 100, fofs[2*i], fofs[2*i+1]))
	}
	// An older root list that the newer one replaces.
	evts = append(evts, followList(t, root, 50, fofs[0]))
	publishAll(t, r, evts...)

	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	cache := reputation.WebCache{Dir: dir, Now: func() time.Time { return now }}
	ctx := testContext(t)
	w, cached, err := cache.Load(ctx, p, root.Public())
	if err != nil || cached || !w.Complete {
		t.Fatalf("first load: cached %v, %+v, %v", cached, w, err)
	}
	if f, s := w.Size(); f != 150 || s != 300 {
		t.Fatalf("web of %d follows and %d of theirs; want 150 and 300", f, s)
	}
	if w.Weight(fofs[299]) != reputation.WeightFollowOfFollow || w.Weight(follows[149].Public()) != reputation.WeightFollow {
		t.Fatal("wrong weights")
	}
	fi, err := os.Stat(filepath.Join(dir, "wot-"+root.Public().Hex()+".json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, %v", fi, err)
	}
	// Within the TTL the cache answers, even with the relay gone.
	r.Close()
	w2, cached, err := cache.Load(ctx, p, root.Public())
	if err != nil || !cached || w2.Weight(fofs[0]) != reputation.WeightFollowOfFollow {
		t.Fatalf("second load: cached %v, %v", cached, err)
	}
	// Past it, the relays are asked again (and here none answers).
	now = now.Add(reputation.WebTTL + time.Minute)
	short := testShortContext(t, time.Second)
	if _, cached, err := cache.Load(short, p, root.Public()); cached || err == nil {
		t.Fatalf("after the TTL without a relay: cached %v, %v", cached, err)
	}
}

// A root following 50,000 keys (about 3.5 MB, near the largest message the
// pool reads) costs a bounded web: MaxFollowsPerList follows, the lists of
// MaxSecondHop of them asked for, 100 to a query.
func TestFetchWeb_HugeFollowListIsBounded(t *testing.T) {
	root := nostr.Generate()
	huge := make([]nostr.PubKey, 50_000)
	for i := range huge {
		huge[i][0], huge[i][1], huge[i][2] = byte(i), byte(i>>8), 1
	}
	rootList := followList(t, root, 100, huge...)
	var reqs, authorsAsked atomic.Int64
	url := relaytest.Scripted(t, func(filters []nostr.Filter) relaytest.Answer {
		reqs.Add(1)
		f := filters[0]
		authorsAsked.Add(int64(len(f.Authors)))
		if len(f.Authors) == 1 && f.Authors[0] == root.Public() {
			return relaytest.Answer{Events: []nostr.Event{rootList}, EOSE: true}
		}
		return relaytest.Answer{EOSE: true}
	})
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{url}})
	defer p.Close()
	w, err := reputation.FetchWeb(testContext(t), p, root.Public())
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := w.Size(); f != reputation.MaxFollowsPerList {
		t.Errorf("%d follows, want %d", f, reputation.MaxFollowsPerList)
	}
	if got, want := authorsAsked.Load(), int64(1+reputation.MaxSecondHop); got != want || reqs.Load() != 1+reputation.MaxSecondHop/100 {
		t.Errorf("asked for %d authors in %d queries; want %d in %d", got, reqs.Load(), want, 1+reputation.MaxSecondHop/100)
	}
	if len(w.Notes) != 2 {
		t.Errorf("notes %q: want the list cut and the lists not read", w.Notes)
	}
}

// A relay that answers the root's list but never the follows' lists is
// waited for only until the deadline: the web has the root's follows, is
// marked incomplete and is not cached.
func TestFetchWeb_SlowRelayIsBoundedByTheDeadline(t *testing.T) {
	root, friend := nostr.Generate(), nostr.Generate().Public()
	rootList := followList(t, root, 100, friend)
	url := relaytest.Scripted(t, func(filters []nostr.Filter) relaytest.Answer {
		if f := filters[0]; len(f.Authors) == 1 && f.Authors[0] == root.Public() {
			return relaytest.Answer{Events: []nostr.Event{rootList}, EOSE: true}
		}
		return relaytest.Answer{} // never answers
	})
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{url}})
	defer p.Close()
	dir := t.TempDir()
	start := time.Now()
	// The deadline is what is tested: 2 s, not scaled.
	w, cached, err := reputation.WebCache{Dir: dir}.Load(testShortContext(t, 2*time.Second), p, root.Public())
	if err != nil || cached || w.Complete || w.Weight(friend) != reputation.WeightFollow || len(w.Notes) != 1 {
		t.Fatalf("web %+v, cached %v, %v", w, cached, err)
	}
	if elapsed := time.Since(start); elapsed > testwait.Timeout(10*time.Second) {
		t.Errorf("took %s past a 2 s deadline", elapsed)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("an incomplete web was cached: %v", entries)
	}
}
