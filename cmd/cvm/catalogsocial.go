package main

import (
	"context"
	"errors"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery/catalogpage"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/social"
)

// catalogNotes is how many of a server's newest notes the page shows.
const catalogNotes = 5

// catalogSocial is the catalog page's Social: profiles, notes and reviews
// read from the discovery relays, and the operator's reviews signed by
// the page's identity (none without one: a throwaway key's review would
// be nobody's).
type catalogSocial struct {
	a       *app
	pool    *nostrx.Pool
	fetcher *outbound.Fetcher
	id      *identity // nil: the page posts no reviews
	relays  []string
}

func (c *catalogSocial) About(ctx context.Context, server nostr.PubKey) (catalogpage.About, error) {
	found, err := social.Fetch(ctx, c.pool, []nostr.PubKey{server}, social.FetchOptions{Notes: catalogNotes, Reviews: true})
	if err != nil {
		return catalogpage.About{}, err
	}
	pr := found[server]
	about := catalogpage.About{Notes: pr.Notes, Reviews: social.ViewThreads(social.Threads(pr.Reviews), social.AuthorNames(ctx, c.pool, pr.Reviews))}
	if about.Notes == nil {
		about.Notes = []social.Note{}
	}
	if !pr.Profile.IsZero() {
		about.Profile = &pr.Profile
		if pr.Profile.NIP05 != "" {
			vctx, cancel := context.WithTimeout(ctx, nip05Timeout)
			about.NIP05Verified = social.VerifyNIP05(vctx, c.fetcher, pr.Profile.NIP05, server) == nil
			cancel()
		}
	}
	if c.id != nil {
		about.Reviewer = nostrx.EncodeNpub(c.id.pubkey())
	}
	return about, nil
}

func (c *catalogSocial) PostReview(ctx context.Context, r catalogpage.ReviewRequest) (nostr.ID, error) {
	if c.id == nil {
		return nostr.ID{}, errors.New("this catalog has no identity to sign reviews with; start it with --key or a configured identity")
	}
	d := social.ReviewDraft{Server: r.Server, Relay: c.relays[0], Rating: r.Rating, Content: r.Content}
	var err error
	if d.Announcement, err = currentAnnouncement(ctx, c.pool, r.Server); err != nil {
		return nostr.ID{}, err
	}
	ev, err := d.Event()
	if err != nil {
		return nostr.ID{}, err
	}
	if err := c.a.signAndPublish(ctx, *c.id, c.relays, &ev); err != nil {
		return nostr.ID{}, err
	}
	return ev.ID, nil
}
