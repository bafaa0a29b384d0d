package main

import (
	"context"
	"fmt"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/social"
)

// isNIP05 tells a NIP-05 name (name@domain) from a key or an alias.
func isNIP05(s string) bool {
	return strings.Contains(s, "@") && !looksLikeKey(s)
}

// outbound is the one fetcher of this invocation for what strangers name
// (NIP-05 documents, Lightning addresses, the usd rate): public addresses
// only, and in the test build the loopback servers a test names
// (outboundtrust.go).
func (a *app) outbound() (*outbound.Fetcher, error) {
	if a.env.fetcher != nil {
		return a.env.fetcher, nil
	}
	if a.fetch == nil {
		opts, err := outboundOptions(a.getenv)
		if err != nil {
			return nil, err
		}
		a.fetch = outbound.New(opts)
	}
	return a.fetch, nil
}

// resolveNIP05 finds the key of a NIP-05 name through the outbound
// fetcher (public addresses only, https, no redirects). The document's
// relays are not used: the domain's operator is not the server's, and the
// server's own relay list (CEP-17) says where it listens.
func (a *app) resolveNIP05(ctx context.Context, name string) (nostrx.PublicKey, error) {
	f, err := a.outbound()
	if err != nil {
		return nostrx.PublicKey{}, err
	}
	n, err := social.ResolveNIP05(ctx, f, name)
	if err != nil {
		return nostrx.PublicKey{}, fmt.Errorf("server %s: %w", clip(name, 80), err)
	}
	a.log.Debug("NIP-05 name resolved", "name", name, "npub", nostrx.EncodeNpub(n.Key))
	return nostrx.PublicKey{Key: n.Key}, nil
}

// serverKey is the key a command names a server by: resolveServer's.
func (a *app) serverKey(ctx context.Context, arg string) (nostr.PubKey, error) {
	pk, err := a.resolveServer(ctx, arg)
	return pk.Key, err
}
