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

func (a *app) printReviews(ctx context.Context, q social.Querier, server nostr.PubKey) error {
	found, err := social.Fetch(ctx, q, []nostr.PubKey{server}, social.FetchOptions{Reviews: true})
	if err != nil {
		return remote(err)
	}
	pr := found[server]
	views := social.ViewThreads(social.Threads(pr.Reviews), social.AuthorNames(ctx, q, pr.Reviews))
	if a.jsonOut {
		return a.printJSON(struct {
			Server  string              `json:"server"`
			Threads []social.ThreadView `json:"threads"`
			Skipped int                 `json:"skipped"`
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

// printThread writes a review and its replies for a person, indented by
// depth; strangers' text goes through termText, which shows control
// characters instead of sending them to the terminal.
func printThread(w io.Writer, v social.ThreadView, indent string) {
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
