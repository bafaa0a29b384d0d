package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/social"
)

// discoverNotes is how many of each server's newest notes cvm discover
// shows.
const discoverNotes = 3

// nip05Parallel bounds the NIP-05 documents fetched at once, and
// nip05Timeout each: a catalog of many servers must not open as many
// connections, nor wait on a slow domain.
const (
	nip05Parallel = 8
	nip05Timeout  = 5 * time.Second
)

// serverSocial is what cvm discover shows of a server beside its
// announcement: its profile (CEP-23), whether its nip05 resolves back to
// it, and its newest notes.
type serverSocial struct {
	Profile       *social.Profile `json:"profile,omitempty"`
	NIP05Verified bool            `json:"nip05Verified,omitempty"`
	Notes         []social.Note   `json:"notes,omitempty"`
}

// discoveredServer is a server as cvm discover --json prints it.
type discoveredServer struct {
	discovery.Server
	serverSocial
}

// social is fetchSocial for cvm discover, within its --timeout.
func (d *discoverCmd) social(ctx context.Context, q social.Querier, servers []discovery.Server) (map[nostr.PubKey]serverSocial, error) {
	f, err := d.outbound()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.df.timeout)
	defer cancel()
	return fetchSocial(ctx, q, f, servers), nil
}

// fetchSocial reads the profiles and notes of servers and checks their
// nip05 names. A failure leaves servers without them: the catalog is
// still worth showing.
func fetchSocial(ctx context.Context, q social.Querier, f *outbound.Fetcher, servers []discovery.Server) map[nostr.PubKey]serverSocial {
	keys := make([]nostr.PubKey, len(servers))
	for i, s := range servers {
		keys[i] = s.Pubkey
	}
	found, _ := social.Fetch(ctx, q, keys, social.FetchOptions{Notes: discoverNotes})
	out := make(map[nostr.PubKey]serverSocial, len(found))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, nip05Parallel)
	for k, pr := range found {
		ss := serverSocial{Notes: pr.Notes}
		if !pr.Profile.IsZero() {
			ss.Profile = &pr.Profile
		}
		out[k] = ss
		if pr.Profile.NIP05 == "" {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			vctx, cancel := context.WithTimeout(ctx, nip05Timeout)
			defer cancel()
			ok := social.VerifyNIP05(vctx, f, pr.Profile.NIP05, k) == nil
			mu.Lock()
			defer mu.Unlock()
			ss := out[k]
			ss.NIP05Verified = ok
			out[k] = ss
		})
	}
	wg.Wait()
	return out
}

// printSocial writes a server's profile and notes for a person; all of
// it is the server's own text, shown through termText.
func printSocial(w io.Writer, ss serverSocial) {
	if p := ss.Profile; p != nil {
		line := "  profile: " + termField(clip(p.Label(), 80))
		if p.NIP05 != "" {
			mark := " (unverified)"
			if ss.NIP05Verified {
				mark = " ✓"
			}
			line += "  " + termField(clip(p.NIP05, 80)) + mark
		}
		fmt.Fprintln(w, line)
		if p.About != "" {
			fmt.Fprintf(w, "    %s\n", termField(clip(firstLine(p.About), 200)))
		}
		for _, f := range []struct{ name, v string }{{"website", p.Website}, {"picture", p.Picture}, {"lightning", p.LUD16}} {
			if f.v != "" {
				fmt.Fprintf(w, "    %s: %s\n", f.name, termField(clip(f.v, 200)))
			}
		}
	}
	for _, n := range ss.Notes {
		at := time.Unix(int64(n.CreatedAt), 0).Local().Format("2006-01-02 15:04")
		fmt.Fprintf(w, "  note %s: %s\n", at, termField(clip(firstLine(n.Content), 200)))
	}
}
