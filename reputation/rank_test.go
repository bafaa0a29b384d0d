package reputation_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/reputation"
	"github.com/cvmgo/cvm/social"
)

func signed(t testing.TB, sk nostr.SecretKey, evt nostr.Event) nostr.Event {
	t.Helper()
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

// announcement is a server's initialize result and tools list, signed at.
func announcement(t testing.TB, sk nostr.SecretKey, name string, at nostr.Timestamp, tools ...string) []nostr.Event {
	var list []string
	for _, tool := range tools {
		list = append(list, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, tool))
	}
	return []nostr.Event{
		signed(t, sk, nostr.Event{Kind: contextvm.KindServerAnnouncement, CreatedAt: at, Tags: nostr.Tags{{"name", name}},
			Content: fmt.Sprintf(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":%q,"version":"1"}}`, name)}),
		signed(t, sk, nostr.Event{Kind: contextvm.KindToolsList, CreatedAt: at, Content: `{"tools":[` + strings.Join(list, ",") + `]}`}),
	}
}

// review is a top-level review of server by sk, rated (0: none), at.
func review(t testing.TB, sk nostr.SecretKey, server nostr.PubKey, rating int, at nostr.Timestamp) nostr.Event {
	t.Helper()
	evt, err := social.ReviewDraft{Server: server, Rating: rating, Content: "review"}.Event()
	if err != nil {
		t.Fatal(err)
	}
	evt.CreatedAt = at
	return signed(t, sk, evt)
}

// trustFixture is a relay holding a web of trust: the root follows 60
// keys, each of them follows 4 of 240 others (300 keys in all).
type trustFixture struct {
	relay   *relay.Server
	root    nostr.SecretKey
	follows []nostr.SecretKey
	fofs    []nostr.SecretKey
}

func newTrustFixture(t *testing.T) *trustFixture {
	// The flood is published from one address: no rate limit.
	unlimited := relay.Options{Limits: relay.Limits{EventsPerSecond: 1e6, EventBurst: 1e6}}
	f := &trustFixture{relay: relaytest.Start(t, unlimited), root: nostr.Generate(), follows: keys(60), fofs: keys(240)}
	evts := []nostr.Event{followList(t, f.root, nostr.Now()-3600, publics(f.follows)...)}
	for i, sk := range f.follows {
		evts = append(evts, followList(t, sk, nostr.Now()-3600, publics(f.fofs[4*i:4*i+4])...))
	}
	publishAll(t, f.relay, evts...)
	return f
}

// rank fetches the catalog, the web and the reviews from the relay, and
// ranks the servers: their names in order, and the scores.
func (f *trustFixture) rank(t *testing.T, history *discovery.History) ([]string, reputation.Scores) {
	t.Helper()
	p := newPool(t, f.relay)
	ctx := testContext(t)
	catalog, err := discovery.Fetch(ctx, p, discovery.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	in, notes, err := reputation.Load(ctx, reputation.LoadOptions{Pool: p, Root: f.root.Public(), History: history})
	if err != nil || len(notes) != 0 {
		t.Fatalf("load: %v, notes %q", err, notes)
	}
	servers := catalog.Servers(discovery.Filter{})
	scores := reputation.Rank(in, servers)
	reputation.Sort(servers, scores)
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	return names, scores
}

// Reviews from the web of trust order servers; a flood of reviews from a
// thousand keys outside it changes no score and so no place.
func TestRank_SybilFloodChangesNothing(t *testing.T) {
	f := newTrustFixture(t)
	day := nostr.Timestamp(24 * 3600)
	announced := nostr.Now() - 30*day
	a, b, c := nostr.Generate(), nostr.Generate(), nostr.Generate()
	var evts []nostr.Event
	for i, s := range []nostr.SecretKey{a, b, c} {
		evts = append(evts, announcement(t, s, string(rune('A'+i)), announced, "echo")...)
	}
	at := announced + day
	for i := range 5 {
		evts = append(evts, review(t, f.follows[i], a.Public(), 5, at))
	}
	for i := range 10 {
		evts = append(evts, review(t, f.fofs[i], a.Public(), 4, at))
	}
	for i := 5; i < 8; i++ {
		evts = append(evts, review(t, f.follows[i], b.Public(), 3, at))
	}
	for i := 8; i < 10; i++ {
		evts = append(evts, review(t, f.follows[i], c.Public(), 1, at))
	}
	publishAll(t, f.relay, evts...)
	history := discovery.OpenHistory("")
	before, scoresBefore := f.rank(t, history)
	if !slices.Equal(before, []string{"A", "B", "C"}) {
		t.Fatalf("ranking %v, want A, B, C: %v", before, scoresBefore)
	}
	if why := scoresBefore[a.Public()].Why; !strings.HasPrefix(why, "5 reviews from people you follow and 10 reviews from people they follow (15 rated, average 4.3/5)") {
		t.Errorf("A's explanation: %q", why)
	}

	// 1,000 fresh keys: 500 give C five stars, 500 give A one.
	sybils := keys(1000)
	var flood []nostr.Event
	for i, sk := range sybils {
		target, rating := c.Public(), 5
		if i%2 == 1 {
			target, rating = a.Public(), 1
		}
		flood = append(flood, review(t, sk, target, rating, nostr.Now()-60))
	}
	publishAll(t, f.relay, flood...)
	after, scoresAfter := f.rank(t, history)
	if !slices.Equal(after, before) {
		t.Errorf("after the flood: %v, before: %v", after, before)
	}
	for pk, s := range scoresBefore {
		if s.Value != scoresAfter[pk].Value {
			t.Errorf("%s: score %v before the flood, %v after", pk.Hex()[:8], s.Value, scoresAfter[pk].Value)
		}
	}

	// The flood is not weak: the same reviews from inside the web would
	// turn the ranking over.
	inside := reputation.NewWeb(reputation.FollowList{Author: f.root.Public(), Follows: publics(sybils)}, nil)
	var floodReviews []social.Review
	for _, e := range flood {
		if r, err := social.ParseReview(e); err == nil {
			floodReviews = append(floodReviews, r)
		}
	}
	catalog := discovery.NewCatalog()
	for _, e := range evts[:6] {
		if _, err := catalog.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	servers := catalog.Servers(discovery.Filter{})
	scores := reputation.Rank(reputation.Inputs{Web: inside, Reviews: floodReviews, History: history}, servers)
	reputation.Sort(servers, scores)
	if servers[0].Name != "C" {
		t.Errorf("the flood from inside the web: %s first, want C", servers[0].Name)
	}
	// And from outside, when it is handed over anyway (not fetched), it
	// is counted as ignored.
	outside := reputation.Rank(reputation.Inputs{Web: reputation.NewWeb(reputation.FollowList{Author: f.root.Public()}, nil), Reviews: floodReviews}, servers)
	if why := outside[c.Public()].Why; !strings.Contains(why, "500 reviews from outside it ignored") {
		t.Errorf("C's explanation with the flood handed over: %q", why)
	}
}

// A review written before the server's current tools announcement counts
// at StaleReviewFactor; one written after, fully.
func TestRank_ReviewsBeforeAndAfterAnAnnouncementChange(t *testing.T) {
	f := newTrustFixture(t)
	day := nostr.Timestamp(24 * 3600)
	t0 := nostr.Now() - 10*day
	s := nostr.Generate()
	var evts []nostr.Event
	evts = append(evts, announcement(t, s, "S", t0, "echo")...)
	for i := range 4 {
		evts = append(evts, review(t, f.follows[i], s.Public(), 5, t0+day))
	}
	publishAll(t, f.relay, evts...)
	_, scores := f.rank(t, nil)
	first := scores[s.Public()]
	want := reputation.Compute(reputation.Evidence{
		Reviews:          slices.Repeat([]reputation.Review{{Weight: 1, Rating: 5}}, 4),
		ToolsAnnouncedAt: t0.Time(), Now: time.Now(),
	})
	if first.Value != want.Value {
		t.Fatalf("before the change: %v (%s), want %v", first.Value, first.Why, want.Value)
	}

	// The server announces other tools: the four reviews were about what
	// it served before.
	t1 := t0 + 2*day
	publishAll(t, f.relay, announcement(t, s, "S", t1, "echo", "shout")...)
	_, scores = f.rank(t, nil)
	second := scores[s.Public()]
	// The reviews' part, by hand: (0.5 + 4·0.5) / (1 + 4·0.5), from
	// (0.5 + 4) / (1 + 4) before.
	if first.Reviews != 0.9 || math.Abs(second.Reviews-2.5/3) > 1e-9 || second.Value >= first.Value || !strings.Contains(second.Why, "(4 about an earlier version)") {
		t.Fatalf("after the change: %v %v (%s), before %v %v", second.Value, second.Reviews, second.Why, first.Value, first.Reviews)
	}

	// Two follows review the new version badly: they weigh fully, the
	// old four at half, and the newest review of an author replaces
	// their old one.
	publishAll(t, f.relay,
		review(t, f.follows[4], s.Public(), 1, t1+day),
		review(t, f.follows[5], s.Public(), 1, t1+day),
		review(t, f.follows[0], s.Public(), 2, t1+day))
	_, scores = f.rank(t, nil)
	third := scores[s.Public()]
	want = reputation.Compute(reputation.Evidence{
		Reviews: []reputation.Review{
			{Weight: 1, Rating: 5, Stale: true}, {Weight: 1, Rating: 5, Stale: true}, {Weight: 1, Rating: 5, Stale: true},
			{Weight: 1, Rating: 1}, {Weight: 1, Rating: 1}, {Weight: 1, Rating: 2},
		},
		ToolsAnnouncedAt: t1.Time(), Now: time.Now(),
	})
	// (0.5 + 3·0.5·1 + 0 + 0 + 1·0.25) / (1 + 3·0.5 + 3)
	if math.Abs(third.Reviews-2.25/5.5) > 1e-9 || third.Value != want.Value || !strings.Contains(third.Why, "6 reviews from people you follow (6 rated, average 3.2/5) (3 about an earlier version)") {
		t.Fatalf("after the new reviews: %v (%s), want %v (%s)", third.Value, third.Why, want.Value, want.Why)
	}
}
