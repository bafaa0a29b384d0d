package didauth

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// TestMiddleware_DidWebClientAndKeyRotation: a client whose DID is a
// did:web (its document served by did.Handler, as a server publishes its
// own) is verified through the caching resolver; after the key rotates,
// the cached document fails the new signature once, and the verifier asks
// past the cache and accepts it.
func TestMiddleware_DidWebClientAndKeyRotation(t *testing.T) {
	var mu sync.Mutex
	var doc *did.Document
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := did.Handler(doc)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer web.Close()
	id, err := did.WebDID(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := did.GenerateKey(did.P256)
	k2, _ := did.GenerateKey(did.Ed25519)
	publish := func(k *did.KeySigner) *did.KeySigner {
		mu.Lock()
		defer mu.Unlock()
		doc = did.ServerDocument(id, k, web.URL+"/mcp")
		return k.WithKeyID(id, doc.VerificationMethod[0].ID)
	}
	v, _ := NewVerifier(Options{RequireAuth: true, Resolver: did.NewResolver(did.ResolverOptions{Fetcher: outboundtest.Allowing(web), RefreshInterval: time.Nanosecond})})
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoCaller)))
	defer srv.Close()
	for i, k := range []*did.KeySigner{k1, k2} {
		signer := publish(k)
		c := &http.Client{Transport: &Transport{Signer: signer}}
		resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(testBody))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 200 || out["did"] != id {
			t.Fatalf("key %d: %d %v", i, resp.StatusCode, out)
		}
	}
	// The document a server publishes names its endpoint.
	r := did.NewResolver(did.ResolverOptions{Fetcher: outboundtest.Allowing(web)})
	d, err := r.Resolve(context.Background(), id)
	if err != nil || len(d.MCPEndpoints()) != 1 || d.MCPEndpoints()[0] != web.URL+"/mcp" {
		t.Fatalf("endpoints %v, %v", d, err)
	}
}

// TestTransport_CompatModeReachesCompatVerifier: cvm's compatibility-mode
// client and server agree, and a strict server refuses that client.
func TestTransport_CompatModeReachesCompatVerifier(t *testing.T) {
	s, _ := did.GenerateKey(did.Secp256k1)
	for _, compat := range []bool{true, false} {
		v, _ := NewVerifier(Options{RequireAuth: true, Compat: compat, Logger: discard})
		srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoCaller)))
		var logged strings.Builder
		tr := &Transport{Signer: s, Mode: Compat, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
		c := &http.Client{Transport: tr}
		resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(testBody))
		if err == nil {
			resp.Body.Close()
			resp, err = c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(testBody))
		}
		srv.Close()
		if n := strings.Count(logged.String(), "compatibility mode"); n != 1 {
			t.Errorf("client warning logged %d times", n)
		}
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if compat && (resp.StatusCode != 200 || out["did"] != s.DID()) {
			t.Errorf("compat server: %d %v", resp.StatusCode, out)
		}
		if !compat && (resp.StatusCode != 401 || out["code"] != CodeMalformed) {
			t.Errorf("strict server: %d %v", resp.StatusCode, out)
		}
	}
}

// TestTransport_CompatHeaderHeldToItsAudience: a compat header naming
// another server is refused even in compatibility mode.
func TestTransport_CompatHeaderHeldToItsAudience(t *testing.T) {
	s, _ := did.GenerateKey(did.Ed25519)
	v, _ := NewVerifier(Options{RequireAuth: true, Compat: true, Logger: discard})
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoCaller)))
	defer srv.Close()
	c := &http.Client{Transport: &Transport{Signer: s, Mode: Compat, Audience: "https://other.example/mcp"}}
	resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(testBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != 401 || out["code"] != CodeWrongAudience {
		t.Fatalf("%d %v", resp.StatusCode, out)
	}
}
