package discovery

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// MaxListedRelays bounds the relays taken from a server's relay list. A
// client connects to every one of them, so a longer list would only let a
// server make its clients open connections; the reference SDK's own lists
// hold one to three.
const MaxListedRelays = 8

// maxIgnoredReported bounds the entries RelayList.Ignored describes; the
// rest are only counted.
const maxIgnoredReported = 8

// RelayList is what a client may use of a server's relay list (CEP-17:
// NIP-65, kind 10002).
type RelayList struct {
	// Relays are the usable relays, those without a read or write marker
	// first (as the reference SDK orders them), at most MaxListedRelays.
	Relays []string
	// Ignored describes entries left out and why (at most eight; Dropped
	// counts them all). Entries beyond MaxListedRelays are counted in
	// Trimmed instead.
	Ignored []IgnoredRelay
	Dropped int
	Trimmed int
}

// IgnoredRelay is an entry of a relay list that a client must not use.
type IgnoredRelay struct {
	URL    string `json:"url"`
	Reason string `json:"reason"`
}

// ReadRelayList reads the relays of a server's relay list, found on the
// relays from (the discovery relays that served it). The list is untrusted
// input, signed by the server but written by whoever runs it, so only what
// a client may safely dial is kept:
//
//   - URLs that nostrx.ParseRelayURL accepts, wss:// only, except that
//     ws:// (unencrypted) is accepted for a loopback host;
//   - a loopback host only when every relay of from is on loopback too (a
//     list read on this machine may name this machine);
//   - a private host (nostrx.ScopePrivate) only when no relay of from is
//     public: a list read on a public relay must not point a client into its
//     own network;
//   - entries of ["r", URL] or ["r", URL, "read"|"write"]; other markers are
//     ignored;
//   - at most MaxListedRelays, unmarked first, without repeats.
//
// It never fails: a list with nothing usable yields no relays, with the
// reasons.
func ReadRelayList(tags nostr.Tags, from []string) RelayList {
	origin := strictestScope(from)
	var l RelayList
	var unmarked, marked []string
	for _, t := range tags {
		if len(t) == 0 || t[0] != "r" {
			continue
		}
		raw := ""
		if len(t) > 1 {
			raw = t[1]
		}
		u, err := listedRelay(t, origin)
		if err != nil {
			l.Dropped++
			if len(l.Ignored) < maxIgnoredReported {
				l.Ignored = append(l.Ignored, IgnoredRelay{URL: clip(raw), Reason: err.Error()})
			}
			continue
		}
		if slices.Contains(unmarked, u) || slices.Contains(marked, u) {
			continue
		}
		if len(t) > 2 && t[2] != "" {
			marked = append(marked, u)
		} else {
			unmarked = append(unmarked, u)
		}
	}
	all := append(unmarked, marked...)
	if len(all) > MaxListedRelays {
		l.Trimmed = len(all) - MaxListedRelays
		all = all[:MaxListedRelays]
	}
	l.Relays = all
	return l
}

// listedRelay checks one ["r", …] entry against the policy of
// ReadRelayList for a list read from relays of scope origin.
func listedRelay(t nostr.Tag, origin nostrx.Scope) (string, error) {
	if len(t) < 2 {
		return "", errors.New("no URL")
	}
	if len(t) > 2 && t[2] != "" && t[2] != "read" && t[2] != "write" {
		return "", fmt.Errorf("unknown marker %q", clip(t[2]))
	}
	u, err := nostrx.ParseRelayURL(t[1])
	if uerr := (*nostrx.RelayURLError)(nil); errors.As(err, &uerr) {
		return "", errors.New(uerr.Reason) // the URL is shown beside the reason
	} else if err != nil {
		return "", err
	}
	scope := nostrx.RelayScope(u)
	switch {
	case scope == nostrx.ScopeLoopback && origin != nostrx.ScopeLoopback:
		return "", fmt.Errorf("a loopback address on a list read from a %s relay", origin)
	case scope == nostrx.ScopePrivate && origin == nostrx.ScopePublic:
		return "", errors.New("a private address on a list read from a public relay")
	case strings.HasPrefix(u, "ws://") && scope != nostrx.ScopeLoopback:
		return "", errors.New("ws:// (unencrypted) is accepted only for a loopback relay; want wss://")
	}
	return u, nil
}

// strictestScope is the scope a list read from relays is trusted with: the
// widest of theirs. Public when from is empty.
func strictestScope(from []string) nostrx.Scope {
	if len(from) == 0 {
		return nostrx.ScopePublic
	}
	s := nostrx.ScopeLoopback
	for _, r := range from {
		s = min(s, nostrx.RelayScope(r))
	}
	return s
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
