package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// isHTTPServer reports whether a server argument is an MCP streamable
// HTTP endpoint rather than a Nostr server.
func isHTTPServer(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// httpSigner is the DID a client signs HTTP requests as: --did-key's key
// (a 0600 key file), else the configured Nostr identity as did:nostr.
func (a *app) httpSigner(cf clientFlags) (did.Signer, error) {
	if cf.didKey != "" {
		s, err := did.ReadKeyFile(cf.didKey)
		if err != nil {
			return nil, fmt.Errorf("--did-key: %w", err)
		}
		return s, nil
	}
	id, err := a.resolveIdentity(cf.key, clientKey)
	if err != nil {
		return nil, err
	}
	return did.NostrSigner(id.secret), nil
}

// httpClient is the HTTP client of an http(s):// server: every request
// signed with DIDAuthV1 as httpSigner, in the kit's format with
// --auth-compat.
func (a *app) httpClient(cf clientFlags) (*http.Client, did.Signer, error) {
	signer, err := a.httpSigner(cf)
	if err != nil {
		return nil, nil, err
	}
	mode := didauth.Strict
	if cf.authCompat {
		mode = didauth.Compat
	}
	return &http.Client{Transport: &didauth.Transport{Signer: signer, Mode: mode}}, signer, nil
}

// dialHTTP connects to an MCP server over streamable HTTP, every request
// signed with DIDAuthV1.
func (a *app) dialHTTP(ctx context.Context, cf clientFlags, server string, do dialOptions) (*oneShot, error) {
	if do.stream {
		return nil, errors.New("--stream reads a ContextVM open stream (CEP-41), which MCP over HTTP does not have; call it without --stream")
	}
	hc, signer, err := a.httpClient(cf)
	if err != nil {
		return nil, err
	}
	var copts mcp.ClientOptions
	if do.client != nil {
		copts = *do.client
	}
	copts.Capabilities = &mcp.ClientCapabilities{}
	client := mcp.NewClient(&mcp.Implementation{Name: "cvm", Version: currentVersion().Version}, &copts)
	cctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	buyer := &quotation.Buyer{URL: server, Client: hc, Pay: cf.pay, Logger: a.log, Signer: signer}
	session := &http.Client{Transport: buyer.Transport(hc.Transport)}
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: server, HTTPClient: session, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, remote(fmt.Errorf("initialize at %s: %w", server, err))
	}
	a.log.Debug("connected over HTTP", "server", server, "did", signer.DID())
	return &oneShot{ClientSession: cs, a: a, httpURL: server, buyer: buyer}, nil
}

// payOverHTTP buys the quotation of a call and names it in its _meta.
func (s *oneShot) payOverHTTP(ctx context.Context, params *mcp.CallToolParams) error {
	id, err := s.buyer.Buy(ctx, params.Name, params.Arguments)
	if derr, ok := declinedError(err, s.buyer.Pay); ok {
		return derr
	}
	if err != nil {
		return remote(err)
	}
	if params.Meta == nil {
		params.Meta = mcp.Meta{}
	}
	params.Meta[quotation.MetaQuotation] = id
	return nil
}

// toolPrices are the prices of tools by name: over Nostr the cap tags of
// the tools/list answer, over HTTP each tool's _meta["nip10/price"].
func (s *oneShot) toolPrices(tools []*mcp.Tool) map[string]*discovery.Price {
	if s.httpURL == "" {
		return toolPrices(s.transport.Prices())
	}
	var prices []contextvm.Price
	for _, t := range tools {
		if p, ok := quotation.PriceOf(t); ok {
			prices = append(prices, p)
		}
	}
	return toolPrices(prices)
}
