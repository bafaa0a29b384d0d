package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/spf13/cobra"
)

func (a *app) unannounceCommand() *cobra.Command {
	var relays []string
	var key string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "unannounce",
		Short: "Delete a server's public announcements",
		Long: `Ask the relays to delete the announcements (kinds 11316–11320) and relay list
(10002) published under the key (NIP-09 deletion, kind 5): discovery stops
finding the server. The key is the server's: --key, else the configured
identity, as for cvm gateway. The server keeps serving whoever knows its key;
a gateway run with --announce announces itself again when it restarts.`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := a.resolveIdentity(key, existingKey)
			if err != nil {
				return err
			}
			pool := nostrx.NewPool(nostrx.PoolOptions{Relays: relays, Logger: a.log})
			defer pool.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			n, err := contextvm.Unannounce(ctx, pool, contextvm.NewKeySigner(id.secret))
			if err != nil {
				return remote(err)
			}
			pk := id.pubkey()
			if a.jsonOut {
				return a.printJSON(struct {
					Pubkey  string `json:"pubkey"`
					Npub    string `json:"npub"`
					Deleted int    `json:"deleted"`
				}{pk.Hex(), nostrx.EncodeNpub(pk), n})
			}
			if n == 0 {
				fmt.Fprintf(a.stdout, "nothing announced by %s on %d relay(s)\n", nostrx.EncodeNpub(pk), len(pool.Relays()))
				return nil
			}
			fmt.Fprintf(a.stdout, "asked %d relay(s) to delete %d announcement(s) of %s\n", len(pool.Relays()), n, nostrx.EncodeNpub(pk))
			return nil
		},
	}
	addPublishFlags(cmd, &relays, &key, &timeout, "the server's secret key file (default: the configured identity)")
	config.Bind(cmd.Flags(), "key", "gateway.key")
	return cmd
}
