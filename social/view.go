package social

import (
	"context"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// ThreadView is a review thread as people read it, in JSON: keys as
// npubs, each author with the name of their profile when they have one.
type ThreadView struct {
	ID         string `json:"id"`
	Author     string `json:"author"`
	AuthorName string `json:"authorName,omitempty"`
	Rating     int    `json:"rating,omitempty"`
	// Announcement is the announcement a top-level review was written
	// against, when it names one.
	Announcement string       `json:"announcement,omitempty"`
	Content      string       `json:"content"`
	CreatedAt    int64        `json:"createdAt"`
	Replies      []ThreadView `json:"replies,omitempty"`
}

// ViewThreads turns threads into views, naming authors from names.
func ViewThreads(threads []Thread, names map[nostr.PubKey]string) []ThreadView {
	out := make([]ThreadView, len(threads))
	for i, t := range threads {
		v := ThreadView{ID: t.ID.Hex(), Author: nostrx.EncodeNpub(t.Author), AuthorName: names[t.Author],
			Rating: t.Rating, Content: t.Content, CreatedAt: int64(t.CreatedAt), Replies: ViewThreads(t.Replies, names)}
		if t.Announcement != (nostr.ID{}) {
			v.Announcement = t.Announcement.Hex()
		}
		out[i] = v
	}
	return out
}

// AuthorNames reads the profiles of the reviews' authors, one query for
// all, and returns the names they give. Names are a nicety shown beside a
// key, never instead of it: a failure returns none.
func AuthorNames(ctx context.Context, q Querier, reviews []Review) map[nostr.PubKey]string {
	var keys []nostr.PubKey
	seen := map[nostr.PubKey]bool{}
	for _, r := range reviews {
		if !seen[r.Author] {
			seen[r.Author] = true
			keys = append(keys, r.Author)
		}
	}
	profiles, _ := Fetch(ctx, q, keys, FetchOptions{})
	names := make(map[nostr.PubKey]string, len(profiles))
	for k, p := range profiles {
		if l := p.Profile.Label(); l != "" {
			names[k] = l
		}
	}
	return names
}
