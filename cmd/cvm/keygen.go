package main

import (
	"errors"
	"fmt"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/spf13/cobra"
)

func (a *app) keygenCommand() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Create a new Nostr identity and save its secret key",
		Long: `Create a new secret key and write it as an nsec to a file readable only by
you (mode 0600). Without --out the file is "key" in the config directory, which
commands use when no other key is given. An existing file is never
overwritten unless --force is given.`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := out
			if path == "" {
				p, err := a.defaultKeyPath()
				if err != nil {
					return err
				}
				path = p
			}
			sk := nostr.Generate()
			if err := nostrx.WriteKeyFile(path, sk, force); err != nil {
				if errors.Is(err, nostrx.ErrKeyFileExists) {
					return fmt.Errorf("%s already exists; keep it, or replace it with --force (the old identity is lost)", path)
				}
				return err
			}
			pk := sk.Public()
			if a.jsonOut {
				return a.printJSON(map[string]string{"npub": nostrx.EncodeNpub(pk), "pubkey": pk.Hex(), "path": path})
			}
			fmt.Fprintf(a.stdout, "npub    %s\npubkey  %s\nsaved   %s\n", nostrx.EncodeNpub(pk), pk.Hex(), path)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the key to (default: key in the config directory)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing key file")
	return cmd
}

func (a *app) whoamiCommand() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the public key of the identity commands would use, and where it comes from",
		Args:  positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := a.resolveIdentity(keyFile, existingKey)
			if err != nil {
				return err
			}
			pk := id.pubkey()
			if a.jsonOut {
				return a.printJSON(map[string]string{"npub": nostrx.EncodeNpub(pk), "pubkey": pk.Hex(), "source": id.origin})
			}
			fmt.Fprintf(a.stdout, "npub    %s\npubkey  %s\nsource  %s\n", nostrx.EncodeNpub(pk), pk.Hex(), id.origin)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "secret key file (nsec or hex)")
	return cmd
}
