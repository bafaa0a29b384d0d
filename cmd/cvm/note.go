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
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/social"
	"github.com/spf13/cobra"
)

func (a *app) noteCommand() *cobra.Command {
	var relays []string
	var key string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "note TEXT",
		Short: "Publish a note (kind 1) as the server",
		Long: `Publish TEXT as a Nostr note (kind 1) signed by the server's key (CEP-23's
social communications: updates, changelogs). The key is the server's:
--key, else the configured identity, as for cvm gateway. cvm discover and
the catalog page show a server's newest notes.`,
		Example: `  cvm note "v1.2: the translate tool now takes a target language"`,
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := args[0]
			switch {
			case strings.TrimSpace(text) == "":
				return usageError(cmd, "wants some text to publish")
			case len(text) > social.MaxNoteContent:
				return fmt.Errorf("a note of %d bytes: at most %d are shown by readers", len(text), social.MaxNoteContent)
			}
			id, err := a.resolveIdentity(key, existingKey)
			if err != nil {
				return err
			}
			ev := social.NoteEvent(text)
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := a.signAndPublish(ctx, id, relays, &ev); err != nil {
				return err
			}
			return a.printPublished(ev, relays)
		},
	}
	addPublishFlags(cmd, &relays, &key, &timeout, "the server's secret key file (default: the configured identity)")
	config.Bind(cmd.Flags(), "key", "gateway.key")
	return cmd
}

// addPublishFlags are the flags of the commands that sign and publish one
// event: where, with which key, how long to wait.
func addPublishFlags(cmd *cobra.Command, relays *[]string, key *string, timeout *time.Duration, keyHelp string) {
	addRelayFlag(cmd, relays)
	f := cmd.Flags()
	f.StringVar(key, "key", "", keyHelp)
	f.DurationVar(timeout, "timeout", 10*time.Second, "how long to wait for the relays")
	config.Bind(f, "timeout", "timeout")
}

// signAndPublish signs ev with id's key and publishes it to relays; the
// first relay that accepts it is enough.
func (a *app) signAndPublish(ctx context.Context, id identity, relays []string, ev *nostr.Event) error {
	signer := contextvm.NewKeySigner(id.secret)
	if err := signer.SignEvent(ctx, ev); err != nil {
		return err
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: relays, Signer: signer, Logger: a.log})
	defer pool.Close()
	if err := pool.Publish(ctx, *ev); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no relay of %s accepted the event in time: %w", strings.Join(pool.Relays(), ", "), err)
		}
		return remote(err)
	}
	return nil
}

// printPublished says what was published: its id, its nevent and where.
func (a *app) printPublished(ev nostr.Event, relays []string) error {
	nevent := nip19.EncodeNevent(ev.ID, relays, ev.PubKey)
	if a.jsonOut {
		return a.printJSON(struct {
			ID     string `json:"id"`
			Nevent string `json:"nevent"`
			Kind   int    `json:"kind"`
			Pubkey string `json:"pubkey"`
		}{ev.ID.Hex(), nevent, int(ev.Kind), ev.PubKey.Hex()})
	}
	_, err := fmt.Fprintf(a.stdout, "published %s (kind %d) as %s\n", ev.ID.Hex(), ev.Kind, nostrx.EncodeNpub(ev.PubKey))
	return err
}
