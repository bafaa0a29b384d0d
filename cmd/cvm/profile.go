package main

import (
	"context"
	"fmt"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/social"
	"github.com/spf13/pflag"
)

// profileFlags are cvm gateway's --profile-* flags: the server's kind 0
// profile (CEP-23), also read from the config's [profile] table.
type profileFlags struct{ p social.Profile }

func (pf *profileFlags) add(f *pflag.FlagSet) {
	for _, fl := range []struct {
		name string
		dst  *string
		help string
	}{
		{"name", &pf.p.Name, "the server's profile name (kind 0, CEP-23)"},
		{"about", &pf.p.About, "the server's profile description"},
		{"picture", &pf.p.Picture, "the server's profile picture URL"},
		{"website", &pf.p.Website, "the server's profile website"},
		{"nip05", &pf.p.NIP05, "the server's NIP-05 name (name@domain) in its profile"},
		{"lud16", &pf.p.LUD16, "the server's lightning address in its profile"},
	} {
		f.StringVar(fl.dst, "profile-"+fl.name, "", fl.help)
		config.Bind(f, "profile-"+fl.name, "profile."+fl.name)
	}
}

// profile is the profile to publish, checked; zero when none was given.
func (pf profileFlags) profile() (social.Profile, error) {
	if err := pf.p.Check(); err != nil {
		return social.Profile{}, fmt.Errorf("--profile-*: %w", err)
	}
	return pf.p, nil
}

// publishProfile makes p's profile the profile of the gateway's key on
// relays (its own and its announce relays), unless they already have it: a profile changed
// between runs is republished, an unchanged one is not. A failure is
// logged, not fatal: the server serves without its profile.
func (g *gatewayCmd) publishProfile(ctx context.Context, p gatewayPlan, relays []string) {
	if p.profile.IsZero() || len(relays) == 0 {
		return
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: relays, Signer: contextvm.NewKeySigner(p.id.secret), Logger: g.log})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(ctx, relayWait)
	defer cancel()
	published, err := social.PublishProfile(ctx, pool, contextvm.NewKeySigner(p.id.secret), p.profile)
	if err != nil {
		g.log.Warn("profile not published", "err", err)
		return
	}
	g.log.Info("profile", "published", published, "name", p.profile.Name)
}
