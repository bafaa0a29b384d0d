package reputation

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/social"
)

// Inputs are what servers are ranked from: the web of trust, the reviews
// fetched (of any servers, by any authors: Rank sorts them out), the
// user's history of calls, and the time.
type Inputs struct {
	Web     *Web
	Reviews []social.Review
	History *discovery.History
	Now     time.Time
}

// Scores are the scores of servers by key. They implement
// discovery.Reputation: a server without a score is in band 0 and not
// admitted.
type Scores map[nostr.PubKey]Score

// Band is pk's score band.
func (s Scores) Band(pk nostr.PubKey) int { return s[pk].Band() }

// Admits reports whether pk's score reaches AdmitThreshold.
func (s Scores) Admits(pk nostr.PubKey) bool {
	sc, ok := s[pk]
	return ok && sc.Admitted()
}

// Rank scores each of servers.
func Rank(in Inputs, servers []discovery.Server) Scores {
	now := cmp.Or(in.Now, time.Now())
	byServer := make(map[nostr.PubKey][]social.Review)
	for _, r := range in.Reviews {
		if !r.IsReply() && r.Author != r.Server {
			byServer[r.Server] = append(byServer[r.Server], r)
		}
	}
	scores := make(Scores, len(servers))
	for _, s := range servers {
		scores[s.Pubkey] = Compute(evidence(in, s, byServer[s.Pubkey], now))
	}
	return scores
}

// evidence gathers what Compute needs of one server: the newest review of
// each author, weighed by the web; the history's calls; the age of its
// tools announcement.
func evidence(in Inputs, s discovery.Server, reviews []social.Review, now time.Time) Evidence {
	e := Evidence{ToolsAnnouncedAt: s.ToolsAnnouncedAt, Now: now}
	newest := make(map[nostr.PubKey]social.Review, len(reviews))
	for _, r := range reviews {
		if old, ok := newest[r.Author]; !ok || r.CreatedAt > old.CreatedAt || (r.CreatedAt == old.CreatedAt && r.ID.Hex() < old.ID.Hex()) {
			newest[r.Author] = r
		}
	}
	for author, r := range newest {
		w := in.Web.Weight(author)
		if w == 0 {
			e.Outsiders++
			continue
		}
		e.Reviews = append(e.Reviews, Review{
			Weight: w,
			Rating: r.Rating,
			Stale:  !s.ToolsAnnouncedAt.IsZero() && r.CreatedAt.Time().Before(s.ToolsAnnouncedAt),
		})
	}
	e.Calls, e.Succeeded, e.P50 = in.History.Get(s.Pubkey).Stats()
	return e
}

// Sort orders servers by score, the highest first, then by name and key.
func Sort(servers []discovery.Server, scores Scores) {
	slices.SortStableFunc(servers, func(a, b discovery.Server) int {
		return cmp.Or(
			cmp.Compare(scores[b.Pubkey].Value, scores[a.Pubkey].Value),
			strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)),
			strings.Compare(a.Pubkey.Hex(), b.Pubkey.Hex()),
		)
	})
}
