package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/quotation"
)

// httpAuth is the DIDAuthV1 verification of the gateway's HTTP endpoint:
// signatures must name audience (the endpoint URL or the gateway's DID),
// nonces are kept in the gateway's durable store (no replay across a
// restart), and --allow (keys, npubs, DIDs; did:nostr:<hex> is that key) is
// enforced with 403. Unsigned requests pass as anonymous unless
// --require-auth or --allow is given (401). --auth-window bounds the
// timestamps; --auth-compat also takes the identity kit's headers.
func httpAuth(store durable.Store, gf gatewayFlags, audiences []string, log *slog.Logger) (func(http.Handler) http.Handler, error) {
	v, err := didauth.NewVerifier(didauth.Options{
		Store:       store,
		RequireAuth: gf.requireAuth,
		Allow:       gf.allow,
		Audiences:   audiences,
		Window:      gf.authWindow,
		Compat:      gf.authCompat,
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("--allow: %w", err)
	}
	return v.Middleware, nil
}

// didDocument is the gateway's DID document: its Nostr key as did:nostr,
// authorized for authentication, and its MCP endpoint as a service of type
// MCPServiceV1.
func didDocument(sk nostr.SecretKey, endpoint string) (json.RawMessage, error) {
	return json.Marshal(did.ServerDocument("", did.NostrSigner(sk), endpoint))
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

// httpPayments is the quotation layer of the HTTP endpoint, collecting the
// tools' --price with the gateway's wallet. Prompts and resources cannot
// be paid for over HTTP yet, so a price on one is refused rather than
// served free.
func httpPayments(store durable.Store, proc payments.Processor, prices []contextvm.Price, caller func(context.Context) (string, bool), log *slog.Logger) (gateway.HTTPPayments, error) {
	if proc == nil || len(prices) == 0 {
		return nil, nil
	}
	caps := map[string]payments.Cap{}
	for _, p := range prices {
		if p.Kind() != "tool" {
			return nil, fmt.Errorf("--price %s: over --http only tools can be priced yet (prompts and resources would be served free); drop it or serve Nostr only", p.Capability)
		}
		lo, hi, err := p.Range()
		if err != nil {
			return nil, fmt.Errorf("--price %s: %w", p.Capability, err)
		}
		unit := p.Unit
		if unit == "" {
			unit = contextvm.DefaultPriceUnit
		}
		caps[p.Name()] = payments.Cap{Capability: p.Capability, Low: lo, High: hi, Unit: unit}
	}
	desk, err := quotation.New(quotation.Options{Store: store, Processor: proc, Prices: caps, Logger: log})
	if err != nil {
		return nil, err
	}
	return quotation.HTTP{Desk: desk, Caller: caller}, nil
}

// deferredHandler serves 503 until set: the HTTP listener starts before
// the handler exists, since the handler's DID document names the
// listener's address (port 0 picks one).
type deferredHandler struct{ h atomic.Pointer[http.Handler] }

func (d *deferredHandler) set(h http.Handler) { d.h.Store(&h) }

func (d *deferredHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := d.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	gateway.WriteHTTPError(w, http.StatusServiceUnavailable, "starting", "the gateway is starting; retry shortly")
}
