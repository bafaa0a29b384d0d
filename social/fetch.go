package social

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"fiatjaf.com/nostr"
)

// Querier reads stored events from relays; *nostrx.Pool is one. Query
// returns what arrived before every relay finished or ctx ended, signatures
// checked.
type Querier interface {
	Query(ctx context.Context, filter nostr.Filter) ([]nostr.Event, error)
}

// Presence is what a key has published about itself and what others wrote
// about it: its newest valid profile, its newest notes and, for a server,
// its reviews. Skipped counts events left out as malformed or oversized.
type Presence struct {
	Profile   Profile  `json:"profile"`
	ProfileAt int64    `json:"profileAt,omitempty"` // unix seconds, 0: no profile
	Notes     []Note   `json:"notes,omitempty"`
	Reviews   []Review `json:"reviews,omitempty"`
	Skipped   int      `json:"skipped,omitempty"`
}

// FetchOptions say what Fetch asks for.
type FetchOptions struct {
	// Notes is how many of each key's newest notes to keep (0: none asked).
	Notes int
	// Reviews asks for the reviews of the keys, as servers.
	Reviews bool
	// MaxEvents bounds the events read of each kind over all keys
	// (default 5000): relays may ignore a filter's limit.
	MaxEvents int
}

const defaultMaxEvents = 5000

// keysPerQuery bounds the keys of one filter: relays limit a REQ's size
// (64 KiB is common; a key is 67 bytes of JSON, an address 75).
const keysPerQuery = 100

// Fetch reads the presence of keys from q: profiles, notes and reviews,
// whichever are asked for, in queries of at most keysPerQuery keys.
// Events that do not parse are counted in Skipped; a review of another key
// than those asked about is dropped. The error is the first query's that
// failed; what was read before it is returned with it.
func Fetch(ctx context.Context, q Querier, keys []nostr.PubKey, opts FetchOptions) (map[nostr.PubKey]*Presence, error) {
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = defaultMaxEvents
	}
	out := make(map[nostr.PubKey]*Presence, len(keys))
	for _, k := range keys {
		out[k] = &Presence{}
	}
	profiles, err := query(ctx, q, keys, opts.MaxEvents, func(c []nostr.PubKey) nostr.Filter { return ProfilesFilter(c...) })
	addProfiles(out, profiles)
	if err != nil {
		return out, fmt.Errorf("social: reading profiles: %w", err)
	}
	if opts.Notes > 0 {
		notes, err := query(ctx, q, keys, opts.MaxEvents, func(c []nostr.PubKey) nostr.Filter { return NotesFilter(opts.Notes*len(c), c...) })
		addNotes(out, notes, opts.Notes)
		if err != nil {
			return out, fmt.Errorf("social: reading notes: %w", err)
		}
	}
	if opts.Reviews {
		reviews, err := query(ctx, q, keys, opts.MaxEvents, func(c []nostr.PubKey) nostr.Filter { return ReviewFilter(c...) })
		addReviews(out, reviews)
		if err != nil {
			return out, fmt.Errorf("social: reading reviews: %w", err)
		}
	}
	return out, nil
}

// query asks for filter(chunk) for each chunk of keys and keeps at most
// limit events in all.
func query(ctx context.Context, q Querier, keys []nostr.PubKey, limit int, filter func([]nostr.PubKey) nostr.Filter) ([]nostr.Event, error) {
	var all []nostr.Event
	for chunk := range slices.Chunk(keys, keysPerQuery) {
		evs, err := q.Query(ctx, filter(chunk))
		all = append(all, head(evs, limit-len(all))...)
		if err != nil {
			return all, err
		}
		if len(all) >= limit {
			break
		}
	}
	return all, nil
}

func head(evs []nostr.Event, n int) []nostr.Event { return evs[:min(len(evs), n)] }

// addProfiles keeps each key's newest profile that parses, as a relay
// keeps the newest version of a replaceable event.
func addProfiles(out map[nostr.PubKey]*Presence, evs []nostr.Event) {
	for _, ev := range evs {
		pr, ok := out[ev.PubKey]
		if !ok || ev.Kind != nostr.KindProfileMetadata || int64(ev.CreatedAt) <= pr.ProfileAt {
			continue
		}
		p, err := ParseProfile(ev)
		if err != nil {
			pr.Skipped++
			continue
		}
		pr.Profile, pr.ProfileAt = p, int64(ev.CreatedAt)
	}
}

// addNotes keeps each key's newest n notes, newest first.
func addNotes(out map[nostr.PubKey]*Presence, evs []nostr.Event, n int) {
	for _, ev := range evs {
		pr, ok := out[ev.PubKey]
		if !ok {
			continue
		}
		note, err := ParseNote(ev)
		if err != nil {
			pr.Skipped++
			continue
		}
		pr.Notes = append(pr.Notes, note)
	}
	for _, pr := range out {
		slices.SortFunc(pr.Notes, func(a, b Note) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
		pr.Notes = pr.Notes[:min(len(pr.Notes), n)]
	}
}

// addReviews files each review under the server it is about, oldest first.
func addReviews(out map[nostr.PubKey]*Presence, evs []nostr.Event) {
	seen := make(map[nostr.ID]bool, len(evs))
	for _, ev := range evs {
		r, err := ParseReview(ev)
		if err != nil {
			if pr, ok := out[firstServer(ev)]; ok {
				pr.Skipped++
			}
			continue
		}
		pr, ok := out[r.Server]
		if !ok || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		pr.Reviews = append(pr.Reviews, r)
	}
	for _, pr := range out {
		slices.SortFunc(pr.Reviews, func(a, b Review) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	}
}

// firstServer is the server an event that failed to parse seems to be
// about, for counting it.
func firstServer(ev nostr.Event) nostr.PubKey {
	if t := ev.Tags.Find("A"); t != nil {
		if pk, err := parseServerAddress(t[1]); err == nil {
			return pk
		}
	}
	return nostr.PubKey{}
}
