package discovery

import (
	"cmp"
	"slices"
	"time"
)

// FailureCooldown is how long after a failure a provider is tried only when
// every other provider has been.
const FailureCooldown = 10 * time.Minute

// Provider is a server offering a verified implementation of a common
// schema, and that tool.
type Provider struct {
	Server Server
	Tool   Tool
}

// Providers lists the servers in c with a verified tool of the common
// schema hash, ranked by Choose.
func (c *Catalog) Providers(hash string, h *History, now time.Time) []Provider {
	var out []Provider
	for _, s := range c.Servers(Filter{SchemaHash: hash}) {
		for _, t := range s.Tools {
			if t.Verified && t.SchemaHash == hash {
				out = append(out, Provider{Server: s, Tool: t})
				break
			}
		}
	}
	Choose(out, h, now)
	return out
}

// Choose orders providers by the policy of `cvm call --schema`: providers
// that failed within FailureCooldown go last (oldest failure first); the rest
// go cheapest first (a price range counts at its top; prices in different
// units are compared as numbers, unconverted); among equal prices, the
// fastest to answer before, then those never tried; ties by public key.
func Choose(ps []Provider, h *History, now time.Time) {
	slices.SortStableFunc(ps, func(a, b Provider) int {
		ra, rb := h.Get(a.Server.Pubkey), h.Get(b.Server.Pubkey)
		fa, fb := recentFailure(ra, now), recentFailure(rb, now)
		switch {
		case fa && !fb:
			return 1
		case fb && !fa:
			return -1
		case fa && fb:
			return ra.LastFailure.Compare(rb.LastFailure)
		}
		return cmp.Or(
			cmp.Compare(a.Tool.Price.High(), b.Tool.Price.High()),
			compareLatency(ra.Latency, rb.Latency),
			cmp.Compare(a.Server.Pubkey.Hex(), b.Server.Pubkey.Hex()),
		)
	})
}

func recentFailure(r Record, now time.Time) bool {
	return !r.LastFailure.IsZero() && r.LastFailure.After(r.LastSuccess) && now.Sub(r.LastFailure) < FailureCooldown
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
