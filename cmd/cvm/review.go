package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip19"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/social"
	"github.com/spf13/cobra"
)

type reviewFlags struct {
	relays  []string
	key     string
	timeout time.Duration
	rating  int
	replyTo string
}

func (a *app) reviewCommand() *cobra.Command {
	var rf reviewFlags
	cmd := &cobra.Command{
		Use:   "review SERVER TEXT",
		Short: "Publish a review of a server (CEP-24)",
		Long: `Publish TEXT as a review of SERVER (an npub, hex key, nprofile or NIP-05
name@domain): a NIP-22 comment (kind 1111) on the server's announcement with
CEP-24's tags, anchored to the announcement the relays have now. --rating
1..5 adds cvm's ["rating","N","5"] tag; --reply-to ID answers a review or
reply instead (no rating). Signed with this cvm's identity (--key, else the
configured one). cvm reviews SERVER lists them.`,
		Example: `  cvm review npub1… "Fast and correct" --rating 5
  cvm review npub1… "Agreed" --reply-to 3f2a…`,
		Args: positional(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error { return a.review(cmd, rf, args[0], args[1]) },
	}
	addPublishFlags(cmd, &rf.relays, &rf.key, &rf.timeout, "secret key file of the reviewer (default: the configured identity)")
	f := cmd.Flags()
	f.IntVar(&rf.rating, "rating", 0, "a rating from 1 to 5 (cvm's extension of CEP-24)")
	f.StringVar(&rf.replyTo, "reply-to", "", "the id (hex or nevent) of the review or reply to answer")
	return cmd
}

func (a *app) review(cmd *cobra.Command, rf reviewFlags, server, text string) error {
	if rf.rating < 0 || rf.rating > social.MaxRating || cmd.Flags().Changed("rating") && rf.rating == 0 {
		return fmt.Errorf("--rating %d: give 1 to %d", rf.rating, social.MaxRating)
	}
	if rf.replyTo != "" && rf.rating != 0 {
		return errors.New("--rating is for a review of the server, not a reply: drop one")
	}
	id, err := a.resolveIdentity(rf.key, existingKey)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), rf.timeout)
	defer cancel()
	pk, err := a.serverKey(ctx, server)
	if err != nil {
		return err
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: rf.relays, Logger: a.log})
	defer pool.Close()
	d := social.ReviewDraft{Server: pk, Relay: pool.Relays()[0], Rating: rf.rating, Content: text}
	if rf.replyTo != "" {
		parent, err := findReview(ctx, pool, rf.replyTo)
		if err != nil {
			return err
		}
		d.Parent = &parent
	} else if d.Announcement, err = currentAnnouncement(ctx, pool, pk); err != nil {
		return err
	}
	ev, err := d.Event()
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "social: "))
	}
	if err := a.signAndPublish(ctx, id, rf.relays, &ev); err != nil {
		return err
	}
	return a.printPublished(ev, rf.relays)
}

// currentAnnouncement is the id of server's newest announcement (kind
// 11316) on the relays, which a review anchors; a server the relays do
// not know is not reviewed (most likely a mistyped key).
func currentAnnouncement(ctx context.Context, q social.Querier, server nostr.PubKey) (nostr.ID, error) {
	evs, err := q.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{server}, Kinds: []nostr.Kind{contextvm.KindServerAnnouncement}})
	if err != nil {
		return nostr.ID{}, remote(fmt.Errorf("reading %s's announcement: %w", nostrx.EncodeNpub(server), err))
	}
	var newest *nostr.Event
	for i, ev := range evs {
		if ev.PubKey == server && (newest == nil || ev.CreatedAt > newest.CreatedAt) {
			newest = &evs[i]
		}
	}
	if newest == nil {
		return nostr.ID{}, fmt.Errorf("%s has no announcement on these relays: check the key, or give the relays it announces on with --relay", nostrx.EncodeNpub(server))
	}
	return newest.ID, nil
}

// findReview reads the review or reply a --reply-to names.
func findReview(ctx context.Context, q social.Querier, ref string) (social.Review, error) {
	id, err := parseEventID(ref)
	if err != nil {
		return social.Review{}, fmt.Errorf("--reply-to %q: %w", clip(ref, 80), err)
	}
	evs, err := q.Query(ctx, nostr.Filter{IDs: []nostr.ID{id}})
	if err != nil {
		return social.Review{}, remote(fmt.Errorf("reading %s: %w", id.Hex(), err))
	}
	for _, ev := range evs {
		if ev.ID != id {
			continue
		}
		r, err := social.ParseReview(ev)
		if err != nil {
			return social.Review{}, fmt.Errorf("--reply-to %s: not a server review: %w", id.Hex()[:12], err)
		}
		return r, nil
	}
	return social.Review{}, fmt.Errorf("--reply-to %s: no such event on these relays (see --relay)", id.Hex()[:12])
}

// parseEventID reads an event id as 64 hex characters or a note/nevent.
func parseEventID(s string) (nostr.ID, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "nostr:")
	if strings.HasPrefix(s, "nevent1") || strings.HasPrefix(s, "note1") {
		_, v, err := nip19.Decode(s)
		switch v := v.(type) {
		case nostr.ID:
			return v, nil
		case nostr.EventPointer:
			return v.ID, nil
		}
		return nostr.ID{}, fmt.Errorf("not a valid note or nevent: %v", err)
	}
	id, err := nostr.IDFromHex(strings.ToLower(s))
	if err != nil || len(s) != 64 {
		return nostr.ID{}, errors.New("want an event id: 64 hex characters, a note1… or an nevent1…")
	}
	return id, nil
}
