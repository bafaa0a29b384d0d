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
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/quotation"
)

// httpAuth is the DID authentication of the gateway's HTTP endpoint.
//
// Package didauth (DIDAuthV1 verification) is built on another branch; until
// it is merged here nothing can be verified, so every HTTP caller is
// anonymous: free tools answer anyone, and --require-auth (or --allow)
// refuses every request with 401 and a JSON body saying so. Replacing this
// function with didauth's Verifier.Middleware and didauth.Caller is the
// whole of the merge.
func httpAuth(require bool) (func(http.Handler) http.Handler, func(context.Context) (string, bool)) {
	caller := func(context.Context) (string, bool) { return "", false }
	if !require {
		return nil, caller
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			msg := "this server requires signed requests: send Authorization: DIDAuthV1 <credentials>"
			if r.Header.Get("Authorization") != "" {
				msg = "this gateway cannot verify DIDAuthV1 signatures yet"
			}
			gateway.WriteHTTPError(w, http.StatusUnauthorized, "unauthorized", msg)
		})
	}, caller
}

// serverDID is the gateway's DID: its Nostr key as did:nostr.
func serverDID(pk nostr.PubKey) string { return "did:nostr:" + pk.Hex() }

// didDocument is the gateway's DID document: its Nostr key, authorized for
// authentication, and its MCP endpoint as a service of type MCPServiceV1.
// (Package did builds it on the didauth branch; this one stands in until it
// is merged.)
func didDocument(pk nostr.PubKey, endpoint string) json.RawMessage {
	did := serverDID(pk)
	key := did + "#key-1"
	doc := map[string]any{
		"@context": []string{"https://www.w3.org/ns/did/v1"},
		"id":       did,
		"verificationMethod": []map[string]any{{
			"id": key, "type": "SchnorrSecp256k1VerificationKey2019", "controller": did, "publicKeyHex": pk.Hex(),
		}},
		"authentication":  []string{key},
		"assertionMethod": []string{key},
		"service": []map[string]any{{
			"id": did + "#mcp", "type": "MCPServiceV1", "serviceEndpoint": endpoint,
		}},
	}
	b, _ := json.Marshal(doc)
	return b
}

// httpAllowed reads --allow for the HTTP endpoint: a DID is allowed if it
// is listed, or if it is did:nostr of an allowed key. Nil when --allow is
// empty (everyone).
func httpAllowed(keys []nostr.PubKey, dids []string) func(string) bool {
	if len(keys) == 0 && len(dids) == 0 {
		return nil
	}
	ok := map[string]bool{}
	for _, d := range dids {
		ok[d] = true
	}
	for _, k := range keys {
		ok[serverDID(k)] = true
	}
	return func(did string) bool { return ok[did] }
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
