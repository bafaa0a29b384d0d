package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/spf13/cobra"
)

// reputationFlags say whose web of trust ranks servers.
type reputationFlags struct {
	wot string
}

func addReputationFlags(cmd *cobra.Command, rf *reputationFlags) {
	f := cmd.Flags()
	f.StringVar(&rf.wot, "wot", "", "root the web of trust that weighs reviews at this key (npub, hex or nprofile; default: the cvm identity)")
	config.Bind(f, "wot", "reputation.wot-root")
}

// history is the user's history of calls to servers, in the cache
// directory (in memory without one).
func (a *app) history() *discovery.History {
	if dir, err := config.CacheDir(a.getenv); err == nil {
		return discovery.OpenHistory(filepath.Join(dir, "history.json"))
	}
	return discovery.OpenHistory("")
}

// recordCall adds a call's outcome to the user's history of the server.
func (a *app) recordCall(cs *oneShot, d time.Duration, err error) {
	if cs.httpURL != "" {
		return // no Nostr key to remember it by
	}
	h := a.history()
	h.Record(cs.tg.key.Key, d, err, time.Now())
	if serr := h.Save(); serr != nil {
		a.log.Warn("could not save the call history", "path", h.Path(), "err", serr)
	}
}

// wotRoot is the key the web of trust is rooted at: --wot (or
// reputation.wot-root), else the cvm identity; ok is false when there is
// neither (a throwaway key follows nobody).
func (a *app) wotRoot(rf reputationFlags, keyFlag string) (nostr.PubKey, bool, error) {
	if rf.wot != "" {
		pk, err := nostrx.ParsePublicKey(rf.wot)
		if err != nil {
			return nostr.PubKey{}, false, fmt.Errorf("--wot %q: %w: give the npub of the person whose follows you trust", shorten(rf.wot, 70), err)
		}
		return pk.Key, true, nil
	}
	id, err := a.resolveIdentity(keyFlag, clientKey)
	if err != nil {
		return nostr.PubKey{}, false, err
	}
	return id.pubkey(), id.origin != "throwaway", nil
}

// reputationOf scores servers for the user (see reputationInputs).
func (a *app) reputationOf(ctx context.Context, pool *nostrx.Pool, rf reputationFlags, keyFlag string, history *discovery.History, servers []discovery.Server) (reputation.Scores, error) {
	in, err := a.reputationInputs(ctx, pool, rf, keyFlag, history, keysOf(servers))
	if err != nil {
		return nil, err
	}
	return reputation.Rank(in, servers), nil
}

// reputationInputs reads what servers are scored from: the web of trust
// (cached) and the reviews its keys wrote (of servers, when given), within
// ctx, and the user's history. Where they fall short it says so on
// stderr, and goes on with what it has.
func (a *app) reputationInputs(ctx context.Context, pool *nostrx.Pool, rf reputationFlags, keyFlag string, history *discovery.History, servers []nostr.PubKey) (reputation.Inputs, error) {
	root, ok, err := a.wotRoot(rf, keyFlag)
	if err != nil {
		return reputation.Inputs{}, err
	}
	in := reputation.Inputs{Web: reputation.NewWeb(reputation.FollowList{}, nil), History: history}
	if !ok {
		fmt.Fprintln(a.stderr, "note: no identity to root the web of trust at, so no review counts: give --wot NPUB or set reputation.wot-root")
	} else {
		cache := reputation.WebCache{}
		if dir, err := config.CacheDir(a.getenv); err == nil {
			cache.Dir = dir
		}
		var notes []string
		in, notes, err = reputation.Load(ctx, reputation.LoadOptions{Pool: pool, Root: root, Cache: cache, History: history, Servers: servers})
		if err != nil {
			fmt.Fprintf(a.stderr, "note: %v; ranked without reviews\n", err)
			in = reputation.Inputs{Web: reputation.NewWeb(reputation.FollowList{Author: root}, nil), History: history}
		}
		for _, n := range notes {
			fmt.Fprintf(a.stderr, "note: web of trust: %s\n", n)
		}
	}
	return in, nil
}

func keysOf(servers []discovery.Server) []nostr.PubKey {
	out := make([]nostr.PubKey, len(servers))
	for i, s := range servers {
		out[i] = s.Pubkey
	}
	return out
}
