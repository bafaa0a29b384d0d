package reputation_test

import (
	"crypto/sha256"
	"fmt"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/reputation"
	"github.com/cvmgo/cvm/social"
)

// seeded is a key derived from a name, the same on every run.
func seeded(name string) nostr.PubKey {
	return nostr.SecretKey(sha256.Sum256([]byte(name))).Public()
}

func seededKeys(prefix string, n int) []nostr.PubKey {
	out := make([]nostr.PubKey, n)
	for i := range out {
		out[i] = seeded(fmt.Sprint(prefix, i))
	}
	return out
}

// A seeded catalog of five translation servers ranked for a user who
// follows 20 people (who follow 80 more), with the user's own calls and a
// flood of 500 five-star reviews from keys nobody follows.
func ExampleRank() {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	days := func(n int) time.Time { return now.Add(-time.Duration(n) * 24 * time.Hour) }
	follows, fofs := seededKeys("follow", 20), seededKeys("fof", 80)
	var lists []reputation.FollowList
	for i, f := range follows {
		lists = append(lists, reputation.FollowList{Author: f, Follows: fofs[4*i : 4*i+4]})
	}
	web := reputation.NewWeb(reputation.FollowList{Author: seeded("me"), Follows: follows}, lists)

	servers := []discovery.Server{
		{Name: "Lingua", Pubkey: seeded("Lingua"), ToolsAnnouncedAt: days(120)},
		{Name: "Babel", Pubkey: seeded("Babel"), ToolsAnnouncedAt: days(20)},
		{Name: "Polyglot", Pubkey: seeded("Polyglot"), ToolsAnnouncedAt: days(300)},
		{Name: "Parrot", Pubkey: seeded("Parrot"), ToolsAnnouncedAt: days(5)},
		{Name: "Newcomer", Pubkey: seeded("Newcomer"), ToolsAnnouncedAt: now},
	}
	var reviews []social.Review
	rate := func(server int, rating int, authors ...nostr.PubKey) {
		for _, a := range authors {
			reviews = append(reviews, social.Review{Author: a, Server: servers[server].Pubkey, Rating: rating, CreatedAt: nostr.Timestamp(days(1).Unix())})
		}
	}
	rate(0, 5, follows[:3]...)
	rate(0, 4, fofs[:6]...)
	rate(1, 4, follows[3:5]...)
	rate(1, 2, fofs[6])
	rate(2, 5, seededKeys("sybil", 500)...)
	rate(3, 1, follows[5])

	history := discovery.OpenHistory("")
	calls := func(server, n, ok int, p50 time.Duration) {
		for i := range n {
			if i < ok {
				history.Succeeded(servers[server].Pubkey, p50, days(2))
			} else {
				history.Failed(servers[server].Pubkey, days(2))
			}
		}
	}
	calls(0, 50, 48, 180*time.Millisecond)
	calls(1, 10, 10, 90*time.Millisecond)
	calls(3, 12, 6, 2*time.Second)

	scores := reputation.Rank(reputation.Inputs{Web: web, Reviews: reviews, History: history, Now: now}, servers)
	reputation.Sort(servers, scores)
	for i, s := range servers {
		sc := scores[s.Pubkey]
		fmt.Printf("%d. %-8s %5.1f  %s\n", i+1, s.Name, sc.Value, sc.Why)
	}
	// Output:
	// 1. Lingua    89.3  3 reviews from people you follow and 6 reviews from people they follow (9 rated, average 4.3/5), 96% of your 50 calls succeeded, p50 180 ms, tools announced 120 days ago
	// 2. Babel     72.0  2 reviews from people you follow and 1 review from people they follow (3 rated, average 3.3/5), 100% of your 10 calls succeeded, p50 90 ms, tools announced 20 days ago
	// 3. Polyglot  55.0  no reviews from your web of trust; 500 reviews from outside it ignored, you have not called it, tools announced 300 days ago
	// 4. Newcomer  45.0  no reviews from your web of trust, you have not called it, tools announced today
	// 5. Parrot    32.6  1 review from people you follow (1 rated, average 1.0/5), 50% of your 12 calls succeeded, p50 2.0 s, tools announced 5 days ago
}
