package main

import (
	"fmt"
	"maps"
	"slices"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/spf13/cobra"
)

// trustFlags choose which servers `cvm call --schema` may send arguments
// to.
type trustFlags struct {
	trusted []string
	policy  string
}

func addTrustFlags(cmd *cobra.Command, tf *trustFlags) {
	f := cmd.Flags()
	f.StringArrayVar(&tf.trusted, "trust", nil, "with --schema: a server you trust with your arguments, as npub, hex or nprofile (repeatable; adds to the [trust] table)")
	f.StringVar(&tf.policy, "trust-policy", "trusted-only", fmt.Sprintf("with --schema: trusted-only, trusted-first, any, or reputation (trusted first, then others whose reputation is %g or more)", reputation.AdmitThreshold))
	config.Bind(f, "trust-policy", "trust-policy")
}

// trust reads the trust list, from --trust and from the [trust] table of
// the config file (name = "npub1…"), and the policy.
func (a *app) trust(tf trustFlags) (discovery.TrustPolicy, map[nostr.PubKey]bool, error) {
	policy, err := discovery.ParseTrustPolicy(tf.policy)
	if err != nil {
		return 0, nil, fmt.Errorf("--trust-policy: %w", err)
	}
	trusted := map[nostr.PubKey]bool{}
	for _, s := range tf.trusted {
		pk, err := nostrx.ParsePublicKey(s)
		if err != nil {
			return 0, nil, fmt.Errorf("--trust %q: %w: give the server's npub (see: cvm discover)", shorten(s, 70), err)
		}
		trusted[pk.Key] = true
	}
	table := a.file.Table("trust")
	for _, name := range slices.Sorted(maps.Keys(table)) {
		pk, err := nostrx.ParsePublicKey(table[name])
		if err != nil {
			return 0, nil, fmt.Errorf("[trust] %s in %s: %w", name, a.file.Path, err)
		}
		trusted[pk.Key] = true
	}
	return policy, trusted, nil
}
