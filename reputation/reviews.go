package reputation

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/social"
)

// MaxReviewers bounds the authors whose reviews are fetched: the root, its
// follows, then theirs, 10,000 in all (100 queries).
const MaxReviewers = 10_000

// MaxReviews bounds the reviews one fetch reads, across all authors.
const MaxReviews = 100_000

// reviewPage is the events asked of one query; a relay may send fewer (the
// embedded relay's cap is 500).
const reviewPage = 500

// FetchReviews reads the reviews of servers (CEP-24, kind 1111 on kind
// 11316) written by the keys of web, at most MaxReviewers of them. Keys
// outside the web weigh nothing, so their reviews are not asked for: a
// flood of them costs the relays' storage, not this fetch, and cannot
// push the web's reviews out of a relay's capped answer. Events that are
// not reviews are skipped. When ctx ends it returns what it has with the
// error. Given servers (at most 100), only their reviews are asked for.
//
// Authors are asked 100 at a time, newest first, each page up to the
// oldest second of the one before (inclusive: several reviews may share
// it). A full page that brings nothing new means more reviews share one
// second than a relay sends at once: the authors are then split in two
// and asked again, down to one author, whose reviews of that second past
// the page are skipped.
func FetchReviews(ctx context.Context, pool *nostrx.Pool, web *Web, servers ...nostr.PubKey) ([]social.Review, error) {
	tags := nostr.TagMap{"K": {strconv.Itoa(int(contextvm.KindServerAnnouncement))}}
	if len(servers) > 0 && len(servers) <= authorsPerQuery {
		tags["A"] = social.ReviewFilter(servers...).Tags["A"]
	}
	authors := web.Keys()
	authors = authors[:min(len(authors), MaxReviewers)]
	type page struct {
		authors []nostr.PubKey
		until   nostr.Timestamp
	}
	var todo []page
	for chunk := range slices.Chunk(authors, authorsPerQuery) {
		todo = append(todo, page{authors: chunk})
	}
	var out []social.Review
	seen := map[nostr.ID]bool{}
	full := 0 // the most events a relay sent for one query: its cap, once reached
	for len(todo) > 0 && len(out) < MaxReviews {
		q := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		evts, err := pool.Query(ctx, nostr.Filter{
			Kinds:   []nostr.Kind{nostr.KindComment},
			Authors: q.authors,
			Tags:    tags,
			Until:   q.until,
			Limit:   reviewPage,
		})
		if err != nil {
			return out, fmt.Errorf("reputation: reviews: %w", err)
		}
		full = max(full, len(evts))
		var oldest nostr.Timestamp
		fresh := 0
		for _, e := range evts {
			if !slices.Contains(q.authors, e.PubKey) {
				continue // a relay that ignores the filter
			}
			if oldest == 0 || e.CreatedAt < oldest {
				oldest = e.CreatedAt
			}
			if seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			fresh++
			if r, err := social.ParseReview(e); err == nil {
				out = append(out, r)
			}
		}
		switch {
		case fresh > 0:
			todo = append(todo, page{q.authors, oldest})
		case len(evts) < full || oldest == 0:
			// Nothing new, and not a full page: these authors are done.
		case len(q.authors) > 1:
			half := len(q.authors) / 2
			todo = append(todo, page{q.authors[:half], q.until}, page{q.authors[half:], q.until})
		default:
			todo = append(todo, page{q.authors, oldest - 1})
		}
	}
	return out, nil
}
