// Package reputation scores ContextVM servers for one user, and says why:
// from reviews (CEP-24) weighed by the user's web of trust, the user's own
// calls to the server, and the age of its tools announcement. The formula
// and every constant in it are in formula.go; docs/reputation.md explains
// them. Scores order `cvm discover --sort reputation` and the catalog page,
// rank providers in `cvm call --schema` after trust and before price
// (Scores implements discovery.Reputation), and admit servers off the trust
// list under `--trust-policy reputation`.
//
// The web of trust is rooted at one key: the keys its follow list (NIP-02,
// kind 3) names weigh WeightFollow, the keys their lists name
// WeightFollowOfFollow, every other key nothing, so that keys created by
// the thousand move no score. Every step is bounded: MaxFollowsPerList keys
// read of one list, the lists of MaxSecondHop follows fetched,
// MaxWebKeys in all, MaxReviewers authors' reviews, MaxReviews reviews, and
// the caller's context for the relays' time.
//
// Files: formula.go (Compute: the formula, its constants, the
// explanation); follows.go (ParseFollowList, kind 3); web.go (Web,
// NewWeb, FetchWeb from relays); webcache.go (WebCache: webs kept in the
// cache directory with a TTL); reviews.go (FetchReviews: the reviews the
// web's keys wrote, paged past relays' caps); rank.go (Rank: the evidence
// of each server, Scores, Sort); load.go (Load: the web and the reviews,
// the inputs of Rank, in one call).
package reputation
