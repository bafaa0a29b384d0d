package reputation

import (
	"context"
	"fmt"
	"slices"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// MaxSecondHop is how many of the root's follows have their own follow
// lists fetched: the first 5,000, in the root's order. It bounds what one
// ranking asks of the relays (50 queries of 100 authors).
const MaxSecondHop = 5_000

// MaxWebKeys bounds the keys a web holds (about 3 MB in memory, 7 MB in
// its cache file): 5,000 lists of 10,000 keys would be 50 million.
const MaxWebKeys = 200_000

// authorsPerQuery bounds the authors of one relay filter: relays limit
// filter sizes.
const authorsPerQuery = 100

// Web is a web of trust rooted at one key: the root and the keys it follows
// weigh WeightFollow, the keys those follow WeightFollowOfFollow, every
// other key 0. It is read-only once built and safe for concurrent use.
type Web struct {
	Root nostr.PubKey
	// follows are the root's follows; second the keys they follow that
	// are not among them.
	follows, second map[nostr.PubKey]struct{}
	// Notes say where the web is less than the relays could have given:
	// a list cut at MaxFollowsPerList, lists not fetched past MaxSecondHop
	// or the deadline, keys past MaxWebKeys.
	Notes []string
	// Complete is false when the deadline cut the fetching short; such a
	// web is not cached.
	Complete bool
}

// Weight is pk's weight in the web.
func (w *Web) Weight(pk nostr.PubKey) float64 {
	if w == nil {
		return 0
	}
	if _, ok := w.follows[pk]; ok || pk == w.Root {
		return WeightFollow
	}
	if _, ok := w.second[pk]; ok {
		return WeightFollowOfFollow
	}
	return 0
}

// Size is the number of keys of each weight: the root's follows, and their
// follows.
func (w *Web) Size() (follows, second int) {
	if w == nil {
		return 0, 0
	}
	return len(w.follows), len(w.second)
}

// Keys lists the keys of positive weight, the root first.
func (w *Web) Keys() []nostr.PubKey {
	keys := make([]nostr.PubKey, 0, 1+len(w.follows)+len(w.second))
	keys = append(keys, w.Root)
	for pk := range w.follows {
		keys = append(keys, pk)
	}
	for pk := range w.second {
		keys = append(keys, pk)
	}
	return keys
}

// NewWeb builds a web from follow lists already read: the root's, and
// those of some of its follows (others are ignored).
func NewWeb(root FollowList, lists []FollowList) *Web {
	w := &Web{Root: root.Author, follows: make(map[nostr.PubKey]struct{}, len(root.Follows)), second: map[nostr.PubKey]struct{}{}, Complete: true}
	if root.Truncated {
		w.note("the root's follow list has more than %d keys: the first %d are used", MaxFollowsPerList, MaxFollowsPerList)
	}
	for _, pk := range root.Follows {
		if pk != w.Root {
			w.follows[pk] = struct{}{}
		}
	}
	for _, fl := range lists {
		if _, ok := w.follows[fl.Author]; !ok {
			continue
		}
		for _, pk := range fl.Follows {
			if _, ok := w.follows[pk]; ok || pk == w.Root {
				continue
			}
			if len(w.second) >= MaxWebKeys {
				w.note("the follows of follows pass %d keys: the rest are left out", MaxWebKeys)
				return w
			}
			w.second[pk] = struct{}{}
		}
	}
	return w
}

func (w *Web) note(format string, args ...any) {
	if n := fmt.Sprintf(format, args...); !slices.Contains(w.Notes, n) {
		w.Notes = append(w.Notes, n)
	}
}

// FetchWeb reads the web rooted at root from pool's relays: root's newest
// follow list, then those of its first MaxSecondHop follows, 100 authors to
// a query. It is bounded by ctx: when ctx ends it returns what it has, with
// Complete false and a note. An error means no relay answered for the
// root's list; a root without one has an empty web.
func FetchWeb(ctx context.Context, pool *nostrx.Pool, root nostr.PubKey) (*Web, error) {
	rootLists, err := queryFollowLists(ctx, pool, []nostr.PubKey{root})
	if err != nil {
		return nil, fmt.Errorf("reputation: the follow list of %s: %w", nostrx.EncodeNpub(root), err)
	}
	rootList := rootLists[root]
	rootList.Author = root
	var lists []FollowList
	complete := true
	hop := rootList.Follows[:min(len(rootList.Follows), MaxSecondHop)]
	for chunk := range slices.Chunk(hop, authorsPerQuery) {
		if ctx.Err() != nil {
			complete = false
			break
		}
		got, _ := queryFollowLists(ctx, pool, chunk) // a relay that does not answer in time leaves these out
		for _, pk := range chunk {
			if fl, ok := got[pk]; ok {
				lists = append(lists, fl)
			}
		}
	}
	if ctx.Err() != nil {
		complete = false
	}
	w := NewWeb(rootList, lists)
	if len(rootList.Follows) > MaxSecondHop {
		w.note("the root follows %d keys: the follow lists of the first %d are read", len(rootList.Follows), MaxSecondHop)
	}
	if !complete {
		w.Complete = false
		w.note("the relays did not answer in time: %d of %d follow lists were read", len(lists), len(hop))
	}
	return w, nil
}

// queryFollowLists returns the newest readable follow list of each author
// the relays have.
func queryFollowLists(ctx context.Context, pool *nostrx.Pool, authors []nostr.PubKey) (map[nostr.PubKey]FollowList, error) {
	evts, err := pool.Query(ctx, nostr.Filter{Kinds: []nostr.Kind{nostr.KindFollowList}, Authors: authors})
	out := make(map[nostr.PubKey]FollowList, len(authors))
	for _, e := range evts {
		if !slices.Contains(authors, e.PubKey) {
			continue // a relay that ignores the filter
		}
		fl, perr := ParseFollowList(e)
		if perr != nil {
			continue
		}
		if old, ok := out[e.PubKey]; !ok || fl.CreatedAt > old.CreatedAt {
			out[e.PubKey] = fl
		}
	}
	return out, err
}
