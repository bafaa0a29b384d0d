package did

import (
	"container/list"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/cvmgo/cvm/outbound"
)

// Resolver resolves a DID to its document. Implementations are safe for
// concurrent use. Errors wrap ErrInvalid (not a DID), ErrUnsupportedMethod
// or ErrNotFound.
type Resolver interface {
	Resolve(ctx context.Context, did string) (*Document, error)
}

// Refresher is a Resolver with a cache that can be bypassed: a verifier
// asks again once, past the cache, when a cached document does not verify
// a signature (the key may have rotated).
type Refresher interface {
	Refresh(ctx context.Context, did string) (*Document, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, did string) (*Document, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, did string) (*Document, error) { return f(ctx, did) }

// nostrFragment is the fragment of a did:nostr's one key, as the Nostr
// community group's did:nostr draft names it.
const nostrFragment = "#key1"

// ResolveKey derives the document of a did:key: one verification method,
// authorized for authentication and assertion, listed under both the W3C
// id (<did>#<multibase>) and @nuwa-ai/identity-kit's (<did>#account-key),
// so that headers of either verify.
func ResolveKey(s string) (*Document, error) {
	d, err := Parse(s)
	if err != nil {
		return nil, err
	}
	if d.Method != "key" {
		return nil, fmt.Errorf("%w: %s is not a did:key", ErrUnsupportedMethod, abbreviate(s))
	}
	b, err := DecodeMultibase(d.ID)
	if err != nil || d.ID[0] != 'z' {
		return nil, fmt.Errorf("%w: %s: identifier is not base58btc multibase", ErrNotFound, abbreviate(s))
	}
	k, err := decodeMulticodec(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotFound, abbreviate(s), err)
	}
	doc := &Document{Context: []string{"https://www.w3.org/ns/did/v1"}, ID: s}
	for _, id := range []string{s + "#" + d.ID, s + "#account-key"} {
		doc.VerificationMethod = append(doc.VerificationMethod, VerificationMethod{
			ID: id, Type: k.vmType(), Controller: s, PublicKeyMultibase: EncodeBase58Multibase(k.Bytes),
		})
		doc.Authentication = append(doc.Authentication, Relationship{Ref: id})
		doc.AssertionMethod = append(doc.AssertionMethod, Relationship{Ref: id})
	}
	return doc, nil
}

// ResolveNostr derives the document of did:nostr:<64 lowercase hex>: one
// BIP-340 key (the Nostr public key), authorized for authentication and
// assertion. No network is used.
func ResolveNostr(s string) (*Document, error) {
	d, err := Parse(s)
	if err != nil {
		return nil, err
	}
	if d.Method != "nostr" {
		return nil, fmt.Errorf("%w: %s is not a did:nostr", ErrUnsupportedMethod, abbreviate(s))
	}
	b, err := hex.DecodeString(d.ID)
	if err != nil || len(b) != 32 || strings.ToLower(d.ID) != d.ID {
		return nil, fmt.Errorf("%w: %s: want 64 lowercase hex characters", ErrNotFound, abbreviate(s))
	}
	if _, err := schnorr.ParsePubKey(b); err != nil {
		return nil, fmt.Errorf("%w: %s: not a secp256k1 x coordinate", ErrNotFound, abbreviate(s))
	}
	id := s + nostrFragment
	return &Document{
		Context: []string{"https://www.w3.org/ns/did/v1"},
		ID:      s,
		VerificationMethod: []VerificationMethod{{
			ID: id, Type: TypeSchnorr, Controller: s, PublicKeyMultibase: EncodeBase58Multibase(b),
		}},
		Authentication:  []Relationship{{Ref: id}},
		AssertionMethod: []Relationship{{Ref: id}},
	}, nil
}

// WebURL returns the URL of a did:web's document: https://<host>/.well-known/did.json,
// or https://<host>/<path>/did.json for did:web:<host>:<path…>. Loopback
// hosts (localhost, 127.0.0.0/8, ::1) are fetched over plain HTTP, which is
// what tests serve; every other host over HTTPS only.
func WebURL(s string) (string, error) {
	d, err := Parse(s)
	if err != nil {
		return "", err
	}
	if d.Method != "web" {
		return "", fmt.Errorf("%w: %s is not a did:web", ErrUnsupportedMethod, abbreviate(s))
	}
	parts := strings.Split(d.ID, ":")
	host, err := url.PathUnescape(parts[0])
	if err != nil || host == "" || strings.ContainsAny(host, "/?#@") {
		return "", fmt.Errorf("%w: %s: bad host", ErrInvalid, abbreviate(s))
	}
	path := "/.well-known"
	if len(parts) > 1 {
		segs := make([]string, len(parts)-1)
		for i, p := range parts[1:] {
			seg, err := url.PathUnescape(p)
			if err != nil || seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "/?#") {
				return "", fmt.Errorf("%w: %s: bad path segment", ErrInvalid, abbreviate(s))
			}
			segs[i] = url.PathEscape(seg)
		}
		path = "/" + strings.Join(segs, "/")
	}
	scheme := "https"
	if isLoopback(host) {
		scheme = "http"
	}
	return scheme + "://" + host + path + "/did.json", nil
}

// WebDID returns the did:web of a server reached at endpoint (its host and
// port; the path is not part of it, so the document is at
// /.well-known/did.json).
func WebDID(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: %q is not an absolute URL", ErrInvalid, endpoint)
	}
	return "did:web:" + strings.ReplaceAll(u.Host, ":", "%3A"), nil
}

func isLoopback(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ResolverOptions configure NewResolver. Zero values take the defaults
// beside them.
type ResolverOptions struct {
	// Fetcher fetches did:web documents (default outbound.New with its
	// defaults: public addresses only, 10 s). A signer names the did:web,
	// so resolving it would otherwise let anyone make the server send GETs
	// into its own network; tests allow their loopback servers by exact
	// address (package outbound/outboundtest).
	Fetcher *outbound.Fetcher
	// CacheSize bounds the documents kept (default 1024), least recently
	// used evicted first.
	CacheSize int
	// TTL is how long a did:web document is kept (default 5 min). did:key
	// and did:nostr documents are derived from the DID and cost less to
	// derive again than to look up, so they are not cached.
	TTL time.Duration
	// Methods resolves further DID methods (or replaces the built-in ones),
	// keyed by method name.
	Methods map[string]Resolver
	// RefreshInterval is the least time between two fetches of one DID
	// by Refresh (default 10 s): Refresh within it returns the cached
	// document, so that requests with bad signatures cannot make the
	// resolver fetch a did:web host's document once each.
	RefreshInterval time.Duration
	// Now is the clock for TTLs (default time.Now).
	Now func() time.Time
}

// maxDocument bounds a fetched did:web document.
const maxDocument = 256 << 10

// documentTypes are the media types a did:web document may be served as:
// the DID ones, and plain JSON (what most static hosts say for did.json).
var documentTypes = []string{"application/did+json", "application/did+ld+json", "application/ld+json", "application/json"}

// CachingResolver resolves did:key, did:nostr and did:web, caching
// did:web documents (and those of Methods) in a bounded LRU cache.
type CachingResolver struct {
	opts ResolverOptions

	mu    sync.Mutex
	lru   *list.List // of *cacheEntry, most recent first
	index map[string]*list.Element
}

type cacheEntry struct {
	did     string
	doc     *Document
	fetched time.Time
	expires time.Time
}

// NewResolver returns a CachingResolver.
func NewResolver(opts ResolverOptions) *CachingResolver {
	if opts.Fetcher == nil {
		opts.Fetcher = outbound.New(outbound.Options{})
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 1024
	}
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Minute
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &CachingResolver{opts: opts, lru: list.New(), index: map[string]*list.Element{}}
}

// Resolve returns the document of did, from the cache when it holds a live
// one. The document returned is shared: callers must not modify it.
func (r *CachingResolver) Resolve(ctx context.Context, did string) (*Document, error) {
	return r.resolve(ctx, did, false)
}

// Refresh resolves did past the cache, and caches the answer; within
// RefreshInterval of the last fetch it returns the cached document.
func (r *CachingResolver) Refresh(ctx context.Context, did string) (*Document, error) {
	return r.resolve(ctx, did, true)
}

func (r *CachingResolver) resolve(ctx context.Context, s string, fresh bool) (*Document, error) {
	d, err := Parse(s)
	if err != nil {
		return nil, err
	}
	custom, hasCustom := r.opts.Methods[d.Method]
	if !hasCustom {
		switch d.Method {
		case "key":
			return ResolveKey(s)
		case "nostr":
			return ResolveNostr(s)
		case "web":
		default:
			return nil, fmt.Errorf("%w: did:%s", ErrUnsupportedMethod, d.Method)
		}
	}
	if doc, fetched, ok := r.cached(s); ok && (!fresh || r.opts.Now().Sub(fetched) < r.opts.RefreshInterval) {
		return doc, nil
	}
	var doc *Document
	if hasCustom {
		doc, err = custom.Resolve(ctx, s)
	} else {
		doc, err = r.fetchWeb(ctx, s)
	}
	if err != nil {
		return nil, err
	}
	r.store(s, doc)
	return doc, nil
}

func (r *CachingResolver) cached(s string) (*Document, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.index[s]
	if !ok {
		return nil, time.Time{}, false
	}
	e := el.Value.(*cacheEntry)
	if !r.opts.Now().Before(e.expires) {
		r.lru.Remove(el)
		delete(r.index, s)
		return nil, time.Time{}, false
	}
	r.lru.MoveToFront(el)
	return e.doc, e.fetched, true
}

func (r *CachingResolver) store(s string, doc *Document) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	e := &cacheEntry{did: s, doc: doc, fetched: now, expires: now.Add(r.opts.TTL)}
	if el, ok := r.index[s]; ok {
		el.Value = e
		r.lru.MoveToFront(el)
		return
	}
	r.index[s] = r.lru.PushFront(e)
	for r.lru.Len() > r.opts.CacheSize {
		last := r.lru.Back()
		r.lru.Remove(last)
		delete(r.index, last.Value.(*cacheEntry).did)
	}
}

// Len is the number of documents cached.
func (r *CachingResolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

func (r *CachingResolver) fetchWeb(ctx context.Context, s string) (*Document, error) {
	u, err := WebURL(s)
	if err != nil {
		return nil, err
	}
	// No redirects: another host would answer for the DID.
	var doc Document
	err = r.opts.Fetcher.GetJSON(ctx, outbound.Request{URL: u, Accept: documentTypes, MaxBytes: maxDocument}, &doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, s, err)
	}
	if doc.ID != s {
		return nil, fmt.Errorf("%w: %s: document is for %q", ErrNotFound, s, abbreviate(doc.ID))
	}
	return &doc, nil
}
