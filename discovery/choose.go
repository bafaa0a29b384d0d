package discovery

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
)

// FailureCooldown is how long a failure counts against a provider.
const FailureCooldown = 10 * time.Minute

// Provider is a server offering a verified implementation of a common
// schema, and that tool.
type Provider struct {
	Server Server
	Tool   Tool
}

// TrustPolicy says which providers of a common schema a caller's arguments
// may be sent to. An announcement proves only that a key claims the
// schema; it says nothing of who runs the server or what it does with the
// arguments (seed 004: "discovery does not imply trust").
type TrustPolicy int

const (
	// TrustedOnly calls only the providers on the trust list. It is the
	// zero value: a caller that says nothing sends nothing to strangers.
	TrustedOnly TrustPolicy = iota
	// TrustedFirst calls trusted providers first and strangers after them.
	TrustedFirst
	// AnyProvider ranks every provider alike, trusted or not.
	AnyProvider
	// ByReputation calls trusted providers first, then strangers whose
	// Reputation admits them (package reputation: a score at or above its
	// documented threshold); other strangers are left out, as under
	// TrustedOnly.
	ByReputation
)

var trustPolicyNames = []string{TrustedOnly: "trusted-only", TrustedFirst: "trusted-first", AnyProvider: "any", ByReputation: "reputation"}

func (p TrustPolicy) String() string {
	if int(p) < len(trustPolicyNames) {
		return trustPolicyNames[p]
	}
	return fmt.Sprintf("TrustPolicy(%d)", int(p))
}

// ParseTrustPolicy reads "trusted-only", "trusted-first", "any" or
// "reputation".
func ParseTrustPolicy(s string) (TrustPolicy, error) {
	if i := slices.Index(trustPolicyNames, s); i >= 0 {
		return TrustPolicy(i), nil
	}
	return 0, fmt.Errorf("unknown trust policy %q: want %s", s, strings.Join(trustPolicyNames, ", "))
}

// ErrNoTrustedProvider means providers exist but the trust policy allows
// none of them.
var ErrNoTrustedProvider = errors.New("no trusted server implements this common schema")

// Ranking is what Choose orders providers by.
type Ranking struct {
	Policy TrustPolicy
	// Trusted are the keys the caller trusts.
	Trusted map[nostr.PubKey]bool
	// History is what earlier calls learned (nil: nothing).
	History *History
	// Reputation ranks providers after trust and before price, and admits
	// strangers under ByReputation (nil: every provider alike, and no
	// stranger admitted).
	Reputation Reputation
	// Now is the time failures are judged at (default time.Now()).
	Now time.Time
}

// Reputation is what Choose asks of a server's standing with the user.
// Package reputation implements it, and keeps the numbers; Choose only
// orders by them. Its methods are called many times per sort, and must be
// cheap and safe for concurrent use.
type Reputation interface {
	// Band is the server's reputation as a coarse grade, higher first:
	// providers of one band are then ordered by price, so that a
	// sliver of score does not outweigh any price.
	Band(pk nostr.PubKey) int
	// Admits reports whether a server not on the trust list may be
	// called under ByReputation.
	Admits(pk nostr.PubKey) bool
}

// Providers lists the servers in c with a verified tool of the common
// schema hash, ranked by Choose. Providers the policy rules out are not
// listed; excluded counts them.
func (c *Catalog) Providers(hash string, r Ranking) (ranked []Provider, excluded int) {
	for _, s := range c.Servers(Filter{SchemaHash: hash}) {
		for _, t := range s.Tools {
			if !t.Verified || t.SchemaHash != hash {
				continue
			}
			if !r.allowed(s.Pubkey) {
				excluded++
			} else {
				ranked = append(ranked, Provider{Server: s, Tool: t})
			}
			break
		}
	}
	Choose(ranked, r)
	return ranked, excluded
}

// allowed reports whether the policy lets pk be called at all.
func (r Ranking) allowed(pk nostr.PubKey) bool {
	switch {
	case r.Trusted[pk]:
		return true
	case r.Policy == TrustedOnly:
		return false
	case r.Policy == ByReputation:
		return r.Reputation != nil && r.Reputation.Admits(pk)
	}
	return true
}

// Choose orders providers by the policy of `cvm call --schema`, one key
// after the other:
//
//  1. trust: trusted providers first (unless the policy is AnyProvider);
//  2. reputation: the higher band first (when Ranking.Reputation is set);
//  3. unit: free tools and prices in the default unit (sats), then other
//     units by name, then unknown prices. Prices in different units are
//     never compared as numbers: there is no rate to convert them by
//     (Units says when candidates differ);
//  4. price: the cheapest first, a range counting at its top;
//  5. remembered latency: the fastest to answer before (median of the
//     calls remembered) first, then those never answered; a provider
//     whose last call failed within FailureCooldown counts as never
//     answered;
//  6. recent failures: among those, the ones that did not just fail first;
//
// and ties by public key, so that the order is the same every time.
func Choose(ps []Provider, r Ranking) {
	now := cmp.Or(r.Now, time.Now())
	slices.SortStableFunc(ps, func(a, b Provider) int {
		ra, rb := r.History.Get(a.Server.Pubkey), r.History.Get(b.Server.Pubkey)
		fa, fb := recentFailure(ra, now), recentFailure(rb, now)
		_, _, la := ra.Stats()
		_, _, lb := rb.Stats()
		if fa {
			la = 0
		}
		if fb {
			lb = 0
		}
		return cmp.Or(
			r.trustOrder(a, b),
			r.reputationOrder(a, b),
			compareUnits(a.Tool.Price, b.Tool.Price),
			cmp.Compare(a.Tool.Price.High(), b.Tool.Price.High()),
			compareLatency(la, lb),
			falseFirst(fa, fb),
			cmp.Compare(a.Server.Pubkey.Hex(), b.Server.Pubkey.Hex()),
		)
	})
}

func (r Ranking) trustOrder(a, b Provider) int {
	if r.Policy == AnyProvider {
		return 0
	}
	return falseFirst(!r.Trusted[a.Server.Pubkey], !r.Trusted[b.Server.Pubkey])
}

func (r Ranking) reputationOrder(a, b Provider) int {
	if r.Reputation == nil {
		return 0
	}
	return cmp.Compare(r.Reputation.Band(b.Server.Pubkey), r.Reputation.Band(a.Server.Pubkey))
}

// unitGroup is the group of step 3 of Choose, and the unit within it.
func unitGroup(p *Price) (int, string) {
	switch {
	case p == nil:
		return 0, ""
	case p.Unknown != "":
		return 2, ""
	case p.Unit == contextvm.DefaultPriceUnit:
		return 0, ""
	}
	return 1, p.Unit
}

func compareUnits(a, b *Price) int {
	ga, ua := unitGroup(a)
	gb, ub := unitGroup(b)
	return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(ua, ub))
}

// Units lists the units the providers' prices are in, in the order of
// providers, when there is more than one; free tools have none and unknown
// prices count as "unknown".
func Units(ps []Provider) []string {
	var units []string
	for _, p := range ps {
		u := ""
		switch price := p.Tool.Price; {
		case price == nil:
			continue
		case price.Unknown != "":
			u = "unknown"
		default:
			u = price.Unit
		}
		if !slices.Contains(units, u) {
			units = append(units, u)
		}
	}
	if len(units) < 2 {
		return nil
	}
	return units
}

func recentFailure(r Record, now time.Time) bool {
	failed := r.LastFailure()
	return !failed.IsZero() && failed.After(r.LastSuccess()) && now.Sub(failed) < FailureCooldown
}

// compareLatency puts known latencies first, fastest first.
func compareLatency(a, b time.Duration) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return cmp.Compare(a, b)
}

// falseFirst orders false before true.
func falseFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
