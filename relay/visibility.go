package relay

import (
	"context"
	"encoding/json"
	"iter"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/khatru"
	"fiatjaf.com/nostr/nip40"
)

// viewer is whom a read is for. Every path that serves events, counts
// them, or answers differently depending on whether one is stored (REQ,
// COUNT, live delivery, NIP-09 lookups, the duplicate answer) asks sees, so
// that no path reveals what another hides. A relay that filters only its
// queries leaks through the rest: an unauthenticated COUNT by "#p" would
// report the gift wraps a REQ with the same filter hides.
type viewer struct {
	r        *Relay
	c        *conn // nil when no connection is reading
	now      time.Time
	internal bool // khatru's own deletions and expirations, which see everything
}

func (r *Relay) viewerFor(ctx context.Context) viewer {
	return viewer{r: r, c: connFrom(ctx), now: time.Now(), internal: khatru.IsInternalCall(ctx)}
}

// sees reports whether v may be shown evt, or told that it exists: not
// past its NIP-40 expiration, and, for a gift wrap, within its retention
// and, with Options.Auth, addressed to a key the connection authenticated
// as.
func (v viewer) sees(evt nostr.Event) bool {
	if v.internal {
		return true
	}
	if exp := nip40.GetExpiration(evt.Tags); exp >= 0 && exp.Time().Before(v.now) {
		return false
	}
	if evt.Kind != KindGiftWrap {
		return true
	}
	if ttl := v.r.opts.GiftWrapTTL; ttl > 0 && evt.CreatedAt.Time().Before(v.now.Add(-ttl)) {
		return false
	}
	return !v.r.opts.Auth || v.c != nil && v.c.authedFor(evt)
}

// visible keeps the events v sees.
func (v viewer) visible(events iter.Seq[nostr.Event]) iter.Seq[nostr.Event] {
	if v.internal {
		return events
	}
	return func(yield func(nostr.Event) bool) {
		for evt := range events {
			if v.sees(evt) && !yield(evt) {
				return
			}
		}
	}
}

// count answers a COUNT: the stored events matching f that the reader
// sees, examining at most Limits.MaxCount of them, newest first. The
// store's own count cannot be used: it does not know who is asking.
// Like the store's count, and unlike a query, it ignores f's limit.
func (r *Relay) count(ctx context.Context, f nostr.Filter) (n uint32, approximate bool) {
	f.Limit, f.LimitZero = 0, false
	v := r.viewerFor(ctx)
	limit := r.limits.MaxCount
	examined := 0
	// One more than the cap tells a count that stopped short from one that
	// is exact.
	for evt := range r.store.QueryEvents(f, limit+1) {
		if examined == limit {
			return n, true
		}
		examined++
		if v.sees(evt) {
			n++
		}
	}
	return n, false
}

// countAnswer is a NIP-45 answer; nostr.CountEnvelope cannot say
// "approximate".
type countAnswer struct {
	sub         string
	n           uint32
	approximate bool
}

func (a countAnswer) MarshalJSON() ([]byte, error) {
	type body struct {
		Count       uint32 `json:"count"`
		Approximate bool   `json:"approximate,omitempty"`
	}
	return json.Marshal([]any{"COUNT", a.sub, body{a.n, a.approximate}})
}
