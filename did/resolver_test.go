package did

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

func TestWebURL(t *testing.T) {
	cases := map[string]string{
		"did:web:example.com":            "https://example.com/.well-known/did.json",
		"did:web:example.com%3A8443":     "https://example.com:8443/.well-known/did.json",
		"did:web:example.com:user:alice": "https://example.com/user/alice/did.json",
		"did:web:127.0.0.1%3A9000":       "http://127.0.0.1:9000/.well-known/did.json",
		"did:web:localhost%3A9000:mcp":   "http://localhost:9000/mcp/did.json",
		"did:web:%5B%3A%3A1%5D%3A9000":   "http://[::1]:9000/.well-known/did.json",
		"did:web:127.0.0.1.example.com":  "https://127.0.0.1.example.com/.well-known/did.json",
	}
	for in, want := range cases {
		if got, err := WebURL(in); err != nil || got != want {
			t.Errorf("WebURL(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"did:web:a%2Fb", "did:web:example.com:..", "did:key:z6Mk"} {
		if _, err := WebURL(bad); err == nil {
			t.Errorf("WebURL(%s) accepted", bad)
		}
	}
}

func TestResolver_DidWebIsFetchedCachedAndBounded(t *testing.T) {
	signer, _ := GenerateKey(Ed25519)
	var fetches atomic.Int32
	mux := http.NewServeMux()
	var srvURL string
	mux.HandleFunc("/.well-known/did.json", func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		id, _ := WebDID(srvURL)
		Handler(ServerDocument(id, signer, srvURL+"/mcp")).ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	srvURL = srv.URL
	id, _ := WebDID(srv.URL)
	now := time.Unix(1000, 0)
	r := NewResolver(ResolverOptions{Fetcher: outboundtest.Allowing(srv), CacheSize: 1, TTL: time.Minute, Now: func() time.Time { return now },
		Methods: map[string]Resolver{"test": ResolverFunc(func(_ context.Context, d string) (*Document, error) { return &Document{ID: d}, nil })}})
	ctx := context.Background()
	doc, err := r.Resolve(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if eps := doc.MCPEndpoints(); len(eps) != 1 || eps[0] != srv.URL+"/mcp" {
		t.Fatalf("MCP endpoints %v", eps)
	}
	vm, ok := doc.Method(id + "#" + strings.TrimPrefix(signer.DID(), "did:key:"))
	if !ok || !doc.Authenticates(vm.ID) {
		t.Fatalf("server key not in its document: %+v", doc)
	}
	if _, err := r.Resolve(ctx, id); err != nil || fetches.Load() != 1 {
		t.Fatalf("second resolve fetched again: %d, %v", fetches.Load(), err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := r.Resolve(ctx, id); err != nil || fetches.Load() != 2 {
		t.Fatalf("expired entry not fetched again: %d", fetches.Load())
	}
	if _, err := r.Resolve(ctx, "did:test:other"); err != nil || r.Len() != 1 {
		t.Fatalf("cache holds %d, want its bound 1", r.Len())
	}
	if _, err := r.Resolve(ctx, id); err != nil || fetches.Load() != 3 {
		t.Fatalf("evicted entry not fetched again: %d", fetches.Load())
	}
	if _, err := r.Refresh(ctx, id); err != nil || fetches.Load() != 3 {
		t.Fatalf("Refresh within RefreshInterval fetched: %d", fetches.Load())
	}
	now = now.Add(11 * time.Second)
	if _, err := r.Refresh(ctx, id); err != nil || fetches.Load() != 4 {
		t.Fatalf("Refresh did not bypass the cache: %d", fetches.Load())
	}
}

func TestResolver_Errors(t *testing.T) {
	nf := httptest.NewServer(http.NotFoundHandler())
	defer nf.Close()
	r := NewResolver(ResolverOptions{Fetcher: outboundtest.Allowing(nf)})
	ctx := context.Background()
	web, _ := WebDID(nf.URL)
	cases := map[string]error{
		"did:example:123":                      ErrUnsupportedMethod,
		"not a did":                            ErrInvalid,
		web:                                    ErrNotFound,
		"did:key:z111":                         ErrNotFound,
		"did:nostr:abc":                        ErrNotFound,
		"did:nostr:" + strings.Repeat("F", 64): ErrNotFound,
	}
	for d, want := range cases {
		if _, err := r.Resolve(ctx, d); !errors.Is(err, want) {
			t.Errorf("Resolve(%s) = %v, want %v", d, err, want)
		}
	}
}

func TestDocument_ReadsNIP7ServiceTypeAndSets(t *testing.T) {
	var doc Document
	err := json.Unmarshal([]byte(`{"id":"did:web:x","service":[
		{"id":"#a","type":"MCPServiceNIP7","serviceEndpoint":"https://x/a"},
		{"id":"#b","type":["Other","MCPServiceV1"],"serviceEndpoint":"https://x/b"},
		{"id":"#c","type":"Other","serviceEndpoint":{"uri":"https://x/c"}}],
		"authentication":["#k",{"id":"did:web:x#e","type":"Ed25519VerificationKey2020","publicKeyMultibase":"zFVen3X669xLzsi6N2V91DoiyzHzg1uAgqiT8jZ9nS96Z"}]}`), &doc)
	if err != nil {
		t.Fatal(err)
	}
	if eps := doc.MCPEndpoints(); len(eps) != 2 || eps[0] != "https://x/a" || eps[1] != "https://x/b" {
		t.Errorf("endpoints %v", eps)
	}
	if !doc.Authenticates("did:web:x#k") || !doc.Authenticates("did:web:x#e") {
		t.Error("relative or embedded authentication entries not read")
	}
	if _, ok := doc.Method("did:web:x#e"); !ok {
		t.Error("embedded method not found")
	}
	b, _ := json.Marshal(ServerDocument("", NostrSigner([32]byte{31: 1}), "https://x/mcp"))
	if !strings.Contains(string(b), `"type":"MCPServiceV1"`) {
		t.Errorf("server document writes %s", b)
	}
}

func TestPrincipal_NostrKeyAndDidNostrAreOne(t *testing.T) {
	s := NostrSigner([32]byte{31: 9})
	pk := s.PublicKey().Bytes
	hexKey := strings.ToLower(strings.TrimPrefix(s.DID(), "did:nostr:"))
	var npk [32]byte
	copy(npk[:], pk)
	for _, in := range []string{s.DID(), hexKey, strings.ToUpper(hexKey), nostrx.EncodeNpub(npk), "did:nostr:" + strings.ToUpper(hexKey)} {
		if p, err := Principal(in); err != nil || p != s.DID() {
			t.Errorf("Principal(%s) = %s, %v", in, p, err)
		}
	}
	if p, _ := Principal("did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw"); p != "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw" {
		t.Errorf("did:key principal %s", p)
	}
	if _, err := Principal("nsec1xyz"); err == nil {
		t.Error("nsec accepted")
	}
}

func TestKeyFile_RoundTripAndPermissions(t *testing.T) {
	dir := t.TempDir()
	for _, typ := range []KeyType{Ed25519, Secp256k1, P256} {
		s, _ := GenerateKey(typ)
		path := filepath.Join(dir, string(typ)+".json")
		if err := WriteKeyFile(path, s, false); err != nil {
			t.Fatal(err)
		}
		if err := WriteKeyFile(path, s, false); err == nil {
			t.Errorf("%s: overwrote without asking", typ)
		}
		got, err := ReadKeyFile(path)
		if err != nil || got.DID() != s.DID() || got.KeyID() != s.KeyID() {
			t.Fatalf("%s: read back %v, %v", typ, got, err)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", typ, fi.Mode())
		}
	}
	path := filepath.Join(dir, "open.json")
	s, _ := GenerateKey(Ed25519)
	_ = WriteKeyFile(path, s, false)
	_ = os.Chmod(path, 0o644)
	if _, err := ReadKeyFile(path); err == nil {
		t.Error("a key file others can read was accepted")
	}
	// A file whose did is not its secret's is refused.
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"type":"ed25519","secret":"`+strings.Repeat("11", 32)+`","did":"did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw"}`), 0o600)
	if _, err := ReadKeyFile(bad); err == nil {
		t.Error("mismatched did accepted")
	}
}

func TestResolveKey_P256StandardAndKitPrefixes(t *testing.T) {
	s, _ := GenerateKey(P256)
	std := s.DID()
	if !strings.HasPrefix(std, "did:key:zDn") {
		t.Fatalf("standard P-256 did:key %s", std)
	}
	kitDID := "did:key:" + EncodeBase58Multibase(append([]byte{0x12, 0x00}, s.PublicKey().Bytes...))
	for _, d := range []string{std, kitDID} {
		doc, err := ResolveKey(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		k, err := doc.VerificationMethod[0].PublicKey()
		if err != nil || !k.Equal(s.PublicKey()) {
			t.Errorf("%s: key %v, %v", d, k, err)
		}
	}
}

// TestResolver_RefusesPrivateHostsByDefault: a did:web naming a loopback
// host (as an attacker's DID could, to reach the server's own network) is
// not fetched unless the Fetcher allows that exact address.
func TestResolver_RefusesPrivateHostsByDefault(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	id, _ := WebDID(srv.URL)
	_, err := NewResolver(ResolverOptions{}).Resolve(context.Background(), id)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, outbound.ErrNotPublic) || hits.Load() != 0 {
		t.Fatalf("err %v, %d requests reached the host", err, hits.Load())
	}
}

// TestResolver_DidWebDocumentComesFromItsHostOnly: a did:web host that
// redirects is not followed, even to a host the fetcher may reach (another
// host would answer for the DID); a document that is not served as JSON, or
// is too big, is refused.
func TestResolver_DidWebDocumentComesFromItsHostOnly(t *testing.T) {
	signer, _ := GenerateKey(Ed25519)
	var id string
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		Handler(ServerDocument(id, signer, "https://x/mcp")).ServeHTTP(w, r)
	}))
	defer other.Close()
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "redirect":
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
		case "html":
			w.Header().Set("Content-Type", "text/html")
			json.NewEncoder(w).Encode(ServerDocument(id, signer, "https://x/mcp"))
		case "big":
			w.Header().Set("Content-Type", "application/did+json")
			w.Write([]byte(`{"id":"` + id + `","x":"` + strings.Repeat("a", maxDocument) + `"}`))
		}
	}))
	defer srv.Close()
	id, _ = WebDID(srv.URL)
	for m, want := range map[string]error{"redirect": outbound.ErrRedirected, "html": outbound.ErrContentType, "big": outbound.ErrTooLarge} {
		mode.Store(m)
		r := NewResolver(ResolverOptions{Fetcher: outboundtest.Allowing(srv, other)})
		if _, err := r.Resolve(context.Background(), id); !errors.Is(err, ErrNotFound) || !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", m, err, want)
		}
	}
	if elsewhere.Load() != 0 {
		t.Fatalf("%d requests followed the redirect", elsewhere.Load())
	}
}
