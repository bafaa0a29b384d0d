package reputation_test

import (
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/reputation"
)

// More reviews share one second (600) than the relay sends for one query
// (its cap is 500): the authors are split until each part fits, so none is
// missed; a stranger's reviews are not fetched at all.
func TestFetchReviews_PagesPastTheRelaysCap(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: 1e6, EventBurst: 1e6}})
	root, follows, stranger := nostr.Generate(), keys(3), nostr.Generate()
	web := reputation.NewWeb(reputation.FollowList{Author: root.Public(), Follows: publics(follows)}, nil)
	at := nostr.Now() - 60
	var evts []nostr.Event
	for i := range 200 {
		server := nostr.Generate().Public()
		for _, sk := range append(follows, stranger) {
			evts = append(evts, review(t, sk, server, 1+i%5, at))
		}
	}
	// Not a review: a comment on something else.
	evts = append(evts, signed(t, follows[0], nostr.Event{Kind: nostr.KindComment, CreatedAt: at, Content: "hi", Tags: nostr.Tags{{"K", "11316"}, {"A", "30023:" + root.Public().Hex() + ":x"}}}))
	publishAll(t, r, evts...)
	got, err := reputation.FetchReviews(testContext(t), newPool(t, r), web)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*200 {
		t.Fatalf("%d reviews, want %d", len(got), 3*200)
	}
	for _, rv := range got {
		if rv.Author == stranger.Public() {
			t.Fatal("a stranger's review was fetched")
		}
	}
}
