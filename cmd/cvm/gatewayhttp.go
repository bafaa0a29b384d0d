package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/payments"
)

// listenHTTP serves the gateway over MCP streamable HTTP at --http:
// DIDAuthV1 with --require-auth, --allow (keys, npubs, DIDs; did:nostr:<hex>
// is that key), --auth-window and --auth-compat, nonces and quotations in
// the gateway's state, the tools' --price collected with the gateway's
// wallet, and prepaid payment channels when g.httpChannels is set (only
// when that wallet may pay_invoice, to refund). The library's refusals are
// told in terms of the flags.
func (g *gatewayCmd) listenHTTP(gw *gateway.Gateway, p gatewayPlan, state durable.Store, proc payments.Processor) (*gateway.HTTPEndpoint, error) {
	ep, err := gw.ListenHTTP(gateway.HTTPEndpointOptions{
		Addr:         g.gf.httpAddr,
		Key:          p.id.secret,
		Store:        state,
		RequireAuth:  g.gf.requireAuth,
		Allow:        g.gf.allow,
		AuthWindow:   g.gf.authWindow,
		AuthCompat:   g.gf.authCompat,
		Processor:    proc,
		Prices:       p.prices,
		Channels:     g.httpChannels,
		InjectCaller: g.gf.injectClientPubkey,
		Logger:       g.log,
	})
	var oe *gateway.OptionError
	switch {
	case err == nil:
	case !errors.As(err, &oe):
		return nil, err
	case oe.Field == "Addr":
		return nil, fmt.Errorf("--http: %w", oe.Err)
	case oe.Field == "Allow":
		return nil, fmt.Errorf("--allow: %w", oe.Err)
	case errors.Is(oe.Err, gateway.ErrPriceNotTool):
		return nil, fmt.Errorf("--price %s: over --http only tools can be priced yet (prompts and resources would be served free); drop it or serve Nostr only", oe.Value)
	default:
		return nil, fmt.Errorf("--price %s: %w", oe.Value, oe.Err)
	}
	if len(p.public) > 0 {
		g.log.Warn("--public does not open capabilities over --http yet: only --allow callers are served there")
	}
	return ep, nil
}

// splitAllow separates the DIDs in --allow (other than did:nostr, which is
// a key) from the keys.
func splitAllow(allow []string) (keys, dids []string, err error) {
	for _, s := range allow {
		s = strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(s, "did:nostr:"):
			keys = append(keys, strings.TrimPrefix(s, "did:nostr:"))
		case strings.HasPrefix(s, "did:"):
			if len(s) < 8 || strings.Count(s, ":") < 2 {
				return nil, nil, fmt.Errorf("--allow %q: want a DID such as did:key:z6Mk… or did:nostr:<hex>", clip(s, 80))
			}
			dids = append(dids, s)
		default:
			keys = append(keys, s)
		}
	}
	return keys, dids, nil
}
