package reputation

import (
	"context"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
)

// LoadOptions say where Load finds the inputs of a ranking.
type LoadOptions struct {
	Pool *nostrx.Pool
	// Root is the key the web of trust is rooted at (cvm: --wot, else
	// reputation.wot-root, else the cvm identity).
	Root    nostr.PubKey
	Cache   WebCache
	History *discovery.History
	// Servers, when there are few (at most 100), are the only servers
	// whose reviews are asked for; otherwise reviews of any server are.
	Servers []nostr.PubKey
}

// Load reads the web of trust (from the cache when fresh) and the reviews
// its keys wrote, bounded by ctx: the inputs of Rank. Notes say where they
// fall short of what the relays have (lists cut, the deadline reached). An
// error means the web could not be read at all.
func Load(ctx context.Context, o LoadOptions) (in Inputs, notes []string, err error) {
	web, _, err := o.Cache.Load(ctx, o.Pool, o.Root)
	if err != nil {
		return Inputs{}, nil, err
	}
	notes = append(notes, web.Notes...)
	reviews, err := FetchReviews(ctx, o.Pool, web, o.Servers...)
	if err != nil {
		notes = append(notes, "reviews: "+err.Error()+": ranked with those read")
	}
	return Inputs{Web: web, Reviews: reviews, History: o.History, Now: time.Now()}, notes, nil
}
