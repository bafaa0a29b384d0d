package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
)

// Errors of Locate, in Location.LookupErr.
var (
	// ErrLookupUnanswered means no discovery relay answered the lookup.
	ErrLookupUnanswered = errors.New("no discovery relay answered")
	// ErrNoRelayList means the discovery relays answered and none had a
	// relay list of the server, or none a client may use.
	ErrNoRelayList = errors.New("no usable relay list for the server")
)

// DefaultLocateTimeout bounds a relay list lookup: a relay that is up
// answers in well under a second, and a client that waits longer has a
// fallback to try.
const DefaultLocateTimeout = 5 * time.Second

// Source says where Locate found a server's relays.
type Source string

const (
	// FromGiven: LocateOptions.Relays, used as they are.
	FromGiven Source = "given"
	// FromHints: the relay hints of an nprofile.
	FromHints Source = "nprofile"
	// FromRelayList: the server's relay list, read on the discovery relays.
	FromRelayList Source = "relay list"
	// FromCache: the server's relay list, read earlier (RelayCache).
	FromCache Source = "cache"
	// FromFallback: no relay list was found; LocateOptions.Fallback.
	FromFallback Source = "fallback"
)

// LocateOptions configure Locate.
type LocateOptions struct {
	// Relays, if set, are where the server is: nothing is looked up.
	Relays []string
	// DiscoveryRelays are where the server's relay list is looked up.
	DiscoveryRelays []string
	// Fallback is used when no relay list is found (default
	// DiscoveryRelays).
	Fallback []string
	// Cache, if set, is consulted before a lookup and keeps what one finds.
	Cache *RelayCache
	// Timeout bounds the lookup (default DefaultLocateTimeout).
	Timeout time.Duration
	// Logger receives a warning for every relay list that had entries
	// left out.
	Logger *slog.Logger
}

// Location is where a server listens, and how Locate knows.
type Location struct {
	Relays []string
	Source Source
	// From are the discovery relays the relay list was read on (FromRelayList,
	// FromCache), or the discovery relays asked (FromFallback).
	From []string
	// Fetched is when a cached list was read (FromCache).
	Fetched time.Time
	// List says what was left out of a list just read (FromRelayList, or
	// FromFallback when nothing in it was usable).
	List RelayList
	// LookupErr says why the fallback is used (FromFallback): it wraps
	// ErrLookupUnanswered or ErrNoRelayList.
	LookupErr error
	// Announcement is the server's announcement (CEP-6) when a lookup read
	// one on the discovery relays; it comes with the relay list at no
	// extra cost. Nil otherwise: no lookup was made, or nothing was found.
	Announcement *Server
}

// Explain says, in one line for a person, which relays are used and why.
func (l Location) Explain() string {
	relays := strings.Join(l.Relays, ", ")
	from := strings.Join(l.From, ", ")
	switch l.Source {
	case FromHints:
		return fmt.Sprintf("using relays %s (from the nprofile)", relays)
	case FromRelayList:
		return fmt.Sprintf("using relays %s (from the server's relay list on %s)", relays, from)
	case FromCache:
		return fmt.Sprintf("using relays %s (from the server's relay list on %s, read %s ago)", relays, from, roughly(time.Since(l.Fetched)))
	case FromFallback:
		return fmt.Sprintf("using relays %s (%v)", relays, l.LookupErr)
	}
	return fmt.Sprintf("using relays %s (as given)", relays)
}

// Locate finds the relays where server listens,
// taking the first of these that applies (CEP-17, in the reference SDK's
// order, with the caller's own choice first):
//
//  1. opts.Relays, as given;
//  2. the relay hints of an nprofile;
//  3. the server's relay list (kind 10002) cached by opts.Cache, or else
//     read on opts.DiscoveryRelays (each asked on its own, so that the
//     list's policy, see ReadRelayList, knows where it came from; the
//     newest list wins), with its announcements, and then cached;
//  4. opts.Fallback.
//
// It fails only on a malformed discovery relay URL, or with no relay at all
// to use; a lookup that finds nothing falls back, saying why in LookupErr.
//
// contextvm.ClientOptions does not call Locate by itself: the transport
// only talks to relays it is given, and the caller decides, and usually
// wants to say, where those came from. Put Location.Relays in
// ClientOptions.Relays.
func Locate(ctx context.Context, pk nostrx.PublicKey, opts LocateOptions) (Location, error) {
	if len(opts.Relays) > 0 {
		return Location{Relays: slices.Clone(opts.Relays), Source: FromGiven}, nil
	}
	if len(pk.Relays) > 0 {
		return Location{Relays: slices.Clone(pk.Relays), Source: FromHints}, nil
	}
	discovery, err := parseRelayURLs(opts.DiscoveryRelays)
	if err != nil {
		return Location{}, fmt.Errorf("discovery: locate: discovery relay: %w", err)
	}
	fallback := opts.Fallback
	if len(fallback) == 0 {
		fallback = discovery
	}
	if len(fallback) == 0 {
		return Location{}, errors.New("discovery: locate: no relays: give discovery relays or the server's relays")
	}
	if cached, ok := opts.Cache.Get(pk.Key); ok {
		// The file is ours, but the policy costs nothing to apply again.
		if l := ReadRelayList(relayTags(cached.Relays), cached.From); len(l.Relays) > 0 {
			return Location{Relays: l.Relays, Source: FromCache, From: cached.From, Fetched: cached.Fetched}, nil
		}
	}
	loc := Location{Relays: slices.Clone(fallback), Source: FromFallback, From: discovery}
	if len(discovery) == 0 {
		loc.LookupErr = fmt.Errorf("%w: no discovery relays", ErrNoRelayList)
		return loc, nil
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLocateTimeout
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	list, from, ann, err := lookup(lctx, pk.Key, discovery, opts.Logger)
	cancel()
	if err := ctx.Err(); err != nil {
		return Location{}, err
	}
	loc.Announcement = ann
	if err != nil {
		loc.LookupErr = err
		return loc, nil
	}
	l := ReadRelayList(list.Tags, from)
	if l.Dropped > 0 || l.Trimmed > 0 {
		logger(opts.Logger).Warn("the server's relay list had entries a client must not use; left them out",
			"server", nostrx.EncodeNpub(pk.Key), "on", strings.Join(from, ", "), "ignored", l.Dropped, "beyond_the_first", l.Trimmed,
			"reasons", describeIgnored(l.Ignored))
	}
	if len(l.Relays) == 0 {
		loc.List = l
		loc.LookupErr = fmt.Errorf("%w: the one on %s names no relay a client may use", ErrNoRelayList, strings.Join(from, ", "))
		return loc, nil
	}
	if err := opts.Cache.Put(pk.Key, l.Relays, from); err != nil {
		logger(opts.Logger).Debug("could not cache the relay list", "err", err)
	}
	return Location{Relays: l.Relays, Source: FromRelayList, From: from, List: l, Announcement: ann}, nil
}

// lookup asks each discovery relay, in one query, for the server's relay
// list and announcements, and returns the newest relay list with the relays
// that served it, and the announcements read on any of them.
func lookup(ctx context.Context, server nostr.PubKey, discovery []string, log *slog.Logger) (list nostr.Event, from []string, ann *Server, err error) {
	type answer struct {
		relay  string
		events []nostr.Event
		err    error
	}
	answers := make([]answer, len(discovery))
	var wg sync.WaitGroup
	for i, relay := range discovery {
		wg.Go(func() {
			pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relay}, Logger: log})
			defer pool.Close()
			// Replaceable kinds: at most one event of each per relay.
			evts, err := pool.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{server}, Kinds: contextvm.AnnouncementKinds, Limit: len(contextvm.AnnouncementKinds)})
			answers[i] = answer{relay, evts, err}
		})
	}
	wg.Wait()
	var best *nostr.Event
	answered := false
	announcements := NewCatalog()
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		answered = true
		for _, e := range a.events {
			if e.Kind != contextvm.KindRelayList {
				announcements.Add(e) // what cannot be used is skipped
				continue
			}
			switch {
			case best == nil || newer(e, *best):
				best, from = &e, []string{a.relay}
			case e.ID == best.ID && !slices.Contains(from, a.relay):
				from = append(from, a.relay)
			}
		}
	}
	if s, ok := announcements.Server(server); ok {
		ann = &s
	}
	switch {
	case !answered:
		return nostr.Event{}, nil, nil, fmt.Errorf("%w (%s)", ErrLookupUnanswered, strings.Join(discovery, ", "))
	case best == nil:
		return nostr.Event{}, nil, ann, fmt.Errorf("%w: none on %s", ErrNoRelayList, strings.Join(discovery, ", "))
	}
	return *best, from, ann, nil
}

// parseRelayURLs checks relay URLs given by a person (a missing scheme is
// added as NormalizeRelayURL does) and returns them normalized, without
// repeats.
func parseRelayURLs(urls []string) ([]string, error) {
	var out []string
	for _, u := range urls {
		p, err := nostrx.ParseRelayURL(nostrx.NormalizeRelayURL(u))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func relayTags(relays []string) nostr.Tags {
	tags := make(nostr.Tags, len(relays))
	for i, r := range relays {
		tags[i] = nostr.Tag{"r", r}
	}
	return tags
}

func describeIgnored(ignored []IgnoredRelay) string {
	parts := make([]string, len(ignored))
	for i, ig := range ignored {
		parts[i] = ig.URL + ": " + ig.Reason
	}
	return strings.Join(parts, "; ")
}

// roughly rounds an age for a person: minutes under an hour, else hours.
func roughly(d time.Duration) string {
	if d < time.Hour {
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
