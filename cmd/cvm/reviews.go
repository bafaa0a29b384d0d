package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/social"
	"github.com/spf13/cobra"
)

func (a *app) reviewsCommand() *cobra.Command {
	var relays []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reviews SERVER",
		Short: "List the reviews of a server (CEP-24)",
		Long: `List the reviews of SERVER (an npub, hex key, nprofile or NIP-05 name@domain)
found on the relays with CEP-24's discovery filter, threaded, each with its
author's profile name (kind 0) and rating when it gives one. --json prints
{"server","threads","skipped"}; each thread is a review with its replies.`,
		Example: `  cvm reviews npub1…`,
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			pk, err := a.serverKey(ctx, args[0])
			if err != nil {
				return err
			}
			pool := nostrx.NewPool(nostrx.PoolOptions{Relays: relays, Logger: a.log})
			defer pool.Close()
			return a.printReviews(ctx, pool, pk)
		},
	}
	addRelayFlag(cmd, &relays)
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the relays")
	return cmd
}

// reviewView is a thread as cvm reviews --json prints it.
type reviewView struct {
	ID         string `json:"id"`
	Author     string `json:"author"`
	AuthorName string `json:"authorName,omitempty"`
	Rating     int    `json:"rating,omitempty"`
	// Announcement is the announcement a top-level review was written
	// against, when it names one.
	Announcement string       `json:"announcement,omitempty"`
	Content      string       `json:"content"`
	CreatedAt    int64        `json:"createdAt"`
	Replies      []reviewView `json:"replies,omitempty"`
}

func (a *app) printReviews(ctx context.Context, q social.Querier, server nostr.PubKey) error {
	found, err := social.Fetch(ctx, q, []nostr.PubKey{server}, social.FetchOptions{Reviews: true})
	if err != nil {
		return remote(err)
	}
	pr := found[server]
	names := authorNames(ctx, q, pr.Reviews)
	threads := social.Threads(pr.Reviews)
	views := make([]reviewView, len(threads))
	for i, t := range threads {
		views[i] = threadView(t, names)
	}
	if a.jsonOut {
		return a.printJSON(struct {
			Server  string       `json:"server"`
			Threads []reviewView `json:"threads"`
			Skipped int          `json:"skipped"`
		}{nostrx.EncodeNpub(server), views, pr.Skipped})
	}
	if len(views) == 0 {
		fmt.Fprintf(a.stderr, "no reviews of %s on these relays\n", nostrx.EncodeNpub(server))
		return nil
	}
	for _, v := range views {
		printThread(a.stdout, v, "")
	}
	if pr.Skipped > 0 {
		fmt.Fprintf(a.stderr, "%d malformed review(s) left out\n", pr.Skipped)
	}
	return nil
}

// authorNames reads the profiles of the reviews' authors: a name is
// shown beside the key, never instead of it.
func authorNames(ctx context.Context, q social.Querier, reviews []social.Review) map[nostr.PubKey]string {
	var keys []nostr.PubKey
	seen := map[nostr.PubKey]bool{}
	for _, r := range reviews {
		if !seen[r.Author] {
			seen[r.Author] = true
			keys = append(keys, r.Author)
		}
	}
	profiles, _ := social.Fetch(ctx, q, keys, social.FetchOptions{}) // names are a nicety: none on failure
	names := make(map[nostr.PubKey]string, len(profiles))
	for k, p := range profiles {
		if l := p.Profile.Label(); l != "" {
			names[k] = l
		}
	}
	return names
}

func threadView(t social.Thread, names map[nostr.PubKey]string) reviewView {
	v := reviewView{ID: t.ID.Hex(), Author: nostrx.EncodeNpub(t.Author), AuthorName: names[t.Author],
		Rating: t.Rating, Content: t.Content, CreatedAt: int64(t.CreatedAt)}
	if t.Announcement != (nostr.ID{}) {
		v.Announcement = t.Announcement.Hex()
	}
	for _, r := range t.Replies {
		v.Replies = append(v.Replies, threadView(r, names))
	}
	return v
}

// printThread writes a review and its replies for a person, indented by
// depth; strangers' text goes through termText, which shows control
// characters instead of sending them to the terminal.
func printThread(w io.Writer, v reviewView, indent string) {
	stars := ""
	if v.Rating > 0 {
		stars = strings.Repeat("★", v.Rating) + strings.Repeat("☆", social.MaxRating-v.Rating) + "  "
	}
	who := shorten(v.Author, 20)
	if v.AuthorName != "" {
		who = termField(clip(v.AuthorName, 60)) + " (" + who + ")"
	}
	at := time.Unix(v.CreatedAt, 0).Local().Format("2006-01-02 15:04")
	fmt.Fprintf(w, "%s%s%s  %s  %s\n", indent, stars, who, at, v.ID[:12])
	fmt.Fprintf(w, "%s  %s\n", indent, termText(v.Content, indent+"  "))
	for _, r := range v.Replies {
		printThread(w, r, indent+"  ↳ ")
	}
}
