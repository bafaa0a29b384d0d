package didauth

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/httpserve"
)

// nonceSpace is the durable.Store space of used nonces.
const nonceSpace = "didauth-nonce"

// maxNonce bounds a nonce: a UUID is 36 characters; the store keeps each.
const maxNonce = 128

// DefaultWindow is how far a request's timestamp may be from the
// verifier's clock, either way, unless Options.Window says otherwise: the
// seed's and the kit's 300 s.
const DefaultWindow = 300 * time.Second

// Options configure a Verifier. Zero values take the defaults beside them.
type Options struct {
	// Resolver resolves signers' DIDs (default did.NewResolver with its
	// defaults: did:key, did:nostr, did:web).
	Resolver did.Resolver
	// Store keeps used nonces until they can no longer verify (timestamp +
	// Window), so that none is accepted twice, restarts included. Default:
	// an in-memory store, which forgets them on restart — pass the
	// server's durable store.
	Store durable.Store
	// Window is the largest difference between a request's timestamp and
	// now, either way (default DefaultWindow).
	Window time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Audiences are the audiences this server answers to: its MCP endpoint
	// URL(s) and its DID. Set them. Empty means the URL the request names
	// (http[s]://Host + path), which the client writes: a header captured
	// at another server can then be replayed here with that server's Host
	// header, so only the nonce (per server) stands in the way. Empty is
	// for tests and for servers that have no stable name.
	Audiences []string
	// Compat also accepts the headers of @nuwa-ai/identity-kit 0.6.0 (see
	// the package documentation for what they leave unprotected).
	Compat bool
	// RequireAuth refuses requests without an Authorization header (401).
	// Otherwise they pass unauthenticated (Caller reports no DID), unless
	// Allow or Allowed is set.
	RequireAuth bool
	// Allow lists the principals allowed (DIDs, npubs, hex Nostr keys; see
	// did.Principal). Allowed, when set, decides instead. A DID refused by
	// either gets 403; with either set, requests without a header get 401.
	Allow   []string
	Allowed func(did string) bool
	// MaxBody bounds the body read to hash it (default 8 MiB): 413 above.
	MaxBody int64
	// Logger receives failures at debug level and the compatibility
	// warning (default slog.Default()).
	Logger *slog.Logger
}

// Verifier checks DIDAuthV1 requests. It is safe for concurrent use.
type Verifier struct {
	opts  Options
	allow map[string]bool
}

// NewVerifier returns a Verifier. It fails on an Allow entry that is not a
// DID or Nostr key.
func NewVerifier(opts Options) (*Verifier, error) {
	if opts.Resolver == nil {
		opts.Resolver = did.NewResolver(did.ResolverOptions{})
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Store == nil {
		opts.Store = durable.NewMemory(durable.Options{Now: opts.Now})
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 8 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	v := &Verifier{opts: opts}
	if len(opts.Allow) > 0 {
		v.allow = make(map[string]bool, len(opts.Allow))
		for _, a := range opts.Allow {
			p, err := did.Principal(a)
			if err != nil {
				return nil, fmt.Errorf("didauth: allow-list entry %q: %w", a, err)
			}
			v.allow[p] = true
		}
	}
	if opts.Compat {
		opts.Logger.Warn("DIDAuthV1 compatibility mode is on: headers of @nuwa-ai/identity-kit 0.6.0 are accepted; " +
			"their signature does not cover nested parameters (method, URL, body) and names no server unless it has a top-level audience, " +
			"so a captured header can be replayed with other parameters, or at another server, within its time window")
	}
	return v, nil
}

// Request is what a signature is checked against.
type Request struct {
	// Method is the HTTP method; Path the request URI (path and query).
	Method, Path string
	// Body is the whole request body.
	Body []byte
	// URL is the endpoint URL the request was sent to
	// (scheme://host/path): the audience when Options.Audiences is empty.
	URL string
}

// Verify checks the Authorization header value against req and returns
// the verified DID. Errors are *Error. A DID that Options.Allow or Allowed
// refuses fails with CodeForbidden (403), and its nonce is not recorded. A
// header that verifies records its nonce: a second Verify of it fails with
// CodeReplayed.
func (v *Verifier) Verify(ctx context.Context, header string, req Request) (string, error) {
	k, err := v.verify(ctx, header, req)
	return k.DID, err
}

// verify is Verify, and returns the key that verified the header.
func (v *Verifier) verify(ctx context.Context, header string, req Request) (Key, error) {
	c, err := ParseHeader(header)
	if err != nil {
		return Key{}, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(c.SignedData, &fields); err != nil {
		return Key{}, &Error{Status: 401, Code: CodeMalformed, Message: "signed_data is not a JSON object", Err: err}
	}
	nonce, ts, err := replayFields(fields)
	if err != nil {
		return Key{}, err
	}
	if err := v.checkTime(ts); err != nil {
		return Key{}, err
	}
	candidates, err := v.bind(c.SignedData, fields, c.Signature.KeyID, req)
	if err != nil {
		return Key{}, err
	}
	sig, err := c.signatureBytes()
	if err != nil {
		return Key{}, err
	}
	signer, pub, err := v.checkSignature(ctx, c, candidates, sig)
	if err != nil {
		return Key{}, err
	}
	// Refused before its nonce is kept: did:keys cost nothing to make, so
	// a stranger who could have nonces recorded could fill the store and
	// lock out the clients that are allowed.
	if !v.allowed(signer) {
		return Key{}, &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: signer + " is authenticated but not allowed on this server"}
	}
	// Nonces are kept per key, not per DID string: one key can go by
	// several DIDs (a P-256 did:key in the standard and in the kit's
	// prefix; any did:web that lists it), and signer_did is outside the
	// signature, so a replay could otherwise change it and pass.
	key := string(pub.Type) + ":" + hex.EncodeToString(pub.Bytes) + "\n" + nonce
	claimed, err := v.opts.Store.Claim(ctx, nonceSpace, []byte(key), time.Unix(ts, 0).Add(v.opts.Window+time.Second))
	if err != nil {
		return Key{}, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the nonce store failed; retry later", Err: err}
	}
	if !claimed {
		return Key{}, fail(CodeReplayed, "nonce %q was already used with the key of %s; sign every request with a fresh nonce", nonce, signer)
	}
	return Key{DID: signer, ID: c.Signature.KeyID, Public: pub}, nil
}

// replayFields reads the top-level nonce and timestamp every mode needs.
func replayFields(f map[string]json.RawMessage) (string, int64, error) {
	var nonce string
	if err := json.Unmarshal(f["nonce"], &nonce); err != nil || nonce == "" || len(nonce) > maxNonce {
		return "", 0, fail(CodeMalformed, "signed_data.nonce must be a string of 1 to %d characters", maxNonce)
	}
	var ts json.Number
	if err := json.Unmarshal(f["timestamp"], &ts); err != nil {
		return "", 0, fail(CodeMalformed, "signed_data.timestamp must be a number (Unix seconds)")
	}
	n, err := ts.Int64()
	if err != nil {
		return "", 0, fail(CodeMalformed, "signed_data.timestamp must be an integer (Unix seconds)")
	}
	return nonce, n, nil
}

func (v *Verifier) checkTime(ts int64) error {
	now := v.opts.Now()
	t := time.Unix(ts, 0)
	w := v.opts.Window
	switch {
	case now.Sub(t) > w:
		return fail(CodeTimestamp, "timestamp %d is %s old, more than the %s allowed; sign with the current time", ts, now.Sub(t).Truncate(time.Second), w)
	case t.Sub(now) > w:
		return fail(CodeTimestamp, "timestamp %d is %s in the future, more than the %s allowed; check the client's clock", ts, t.Sub(now).Truncate(time.Second), w)
	}
	return nil
}

// signedBytes is one way the signature may have been made.
type signedBytes struct {
	mode Mode
	msg  []byte
}

func (s signedBytes) String() string { return s.mode.String() }

// bind checks the request against the signed fields and returns the byte
// strings the signature may cover.
func (v *Verifier) bind(raw []byte, f map[string]json.RawMessage, keyID string, req Request) ([]signedBytes, error) {
	_, hasMethod := f["method"]
	_, hasPath := f["path"]
	_, hasBody := f["body_sha256"]
	_, hasAud := f["audience"]
	_, hasKey := f["key_id"]
	strict := hasMethod && hasPath && hasBody && hasAud && hasKey
	var out []signedBytes
	if strict {
		var p Payload
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, &Error{Status: 401, Code: CodeMalformed, Message: "signed_data fields have the wrong types", Err: err}
		}
		if p.KeyID != keyID {
			return nil, fail(CodeKeyNotFound, "signed for key %q, but signature.key_id is %q", p.KeyID, keyID)
		}
		if err := v.checkAudience(p.Audience, req); err != nil {
			return nil, err
		}
		switch {
		case !strings.EqualFold(p.Method, req.Method):
			return nil, fail(CodeRequestMismatch, "signed for method %s, sent as %s", p.Method, req.Method)
		case p.Path != req.Path:
			return nil, fail(CodeRequestMismatch, "signed for path %q, sent to %q", p.Path, req.Path)
		case !strings.EqualFold(p.BodySHA256, BodyHash(req.Body)):
			return nil, fail(CodeRequestMismatch, "signed for another body: body_sha256 differs from the body's SHA-256")
		}
	} else if !v.opts.Compat {
		return nil, fail(CodeMalformed, "signed_data must bind method, path, body_sha256, audience and key_id (strict mode); "+
			"a header made by @nuwa-ai/identity-kit verifies only where compatibility mode is on")
	} else if hasAud {
		// The kit does not check an audience; when a header names one
		// anyway, it is held to it.
		var aud string
		if err := json.Unmarshal(f["audience"], &aud); err != nil {
			return nil, fail(CodeMalformed, "signed_data.audience must be a string")
		}
		if err := v.checkAudience(aud, req); err != nil {
			return nil, err
		}
	}
	if strict {
		c, err := Canonical(raw)
		if err != nil {
			return nil, &Error{Status: 401, Code: CodeMalformed, Message: err.Error(), Err: err}
		}
		out = append(out,
			signedBytes{Strict, append([]byte(SeparatorNIP10), c...)},
			signedBytes{Strict, append([]byte(SeparatorNIP7), c...)})
	}
	if v.opts.Compat {
		c, err := KitCanonical(raw)
		if err != nil {
			return nil, &Error{Status: 401, Code: CodeMalformed, Message: err.Error(), Err: err}
		}
		out = append(out, signedBytes{Compat, append([]byte(SeparatorKit), c...)})
	}
	return out, nil
}

func (v *Verifier) checkAudience(aud string, req Request) error {
	if len(v.opts.Audiences) == 0 {
		if aud == req.URL {
			return nil
		}
		return fail(CodeWrongAudience, "signed for audience %q, but this endpoint is %q", aud, req.URL)
	}
	for _, a := range v.opts.Audiences {
		if aud == a {
			return nil
		}
	}
	return fail(CodeWrongAudience, "signed for audience %q, but this server is %s", aud, strings.Join(v.opts.Audiences, " or "))
}

// checkSignature resolves the signer and verifies the signature over one
// of the candidates, asking the resolver once more past its cache when the
// cached document does not verify it.
func (v *Verifier) checkSignature(ctx context.Context, c *Credentials, candidates []signedBytes, sig []byte) (string, did.PublicKey, error) {
	signer := c.Signature.SignerDID
	if _, err := did.Parse(signer); err != nil {
		return "", did.PublicKey{}, &Error{Status: 401, Code: CodeMalformed, Message: "signature.signer_did is not a DID: " + err.Error(), Err: err}
	}
	if !strings.HasPrefix(c.Signature.KeyID, signer+"#") {
		return "", did.PublicKey{}, fail(CodeKeyNotFound, "key_id %q is not a key of %s (want %s#<fragment>)", c.Signature.KeyID, signer, signer)
	}
	doc, err := v.opts.Resolver.Resolve(ctx, signer)
	if err != nil {
		return "", did.PublicKey{}, resolveError(signer, err)
	}
	pub, verr := v.verifyWith(doc, c, candidates, sig)
	if verr != nil && (verr.Code == CodeBadSignature || verr.Code == CodeKeyNotFound) {
		if r, ok := v.opts.Resolver.(did.Refresher); ok {
			if doc2, err := r.Refresh(ctx, signer); err == nil {
				pub, verr = v.verifyWith(doc2, c, candidates, sig)
			}
		}
	}
	if verr != nil {
		return "", did.PublicKey{}, verr
	}
	return signer, pub, nil
}

func (v *Verifier) verifyWith(doc *did.Document, c *Credentials, candidates []signedBytes, sig []byte) (did.PublicKey, *Error) {
	if doc.ID != c.Signature.SignerDID {
		return did.PublicKey{}, fail(CodeUnresolvable, "the document resolved for %s is for %q", c.Signature.SignerDID, doc.ID)
	}
	vm, ok := doc.Method(c.Signature.KeyID)
	if !ok {
		return did.PublicKey{}, fail(CodeKeyNotFound, "key %s is not in the DID document of %s", c.Signature.KeyID, c.Signature.SignerDID)
	}
	if !doc.Authenticates(c.Signature.KeyID) {
		return did.PublicKey{}, fail(CodeKeyNotAuthorized, "key %s is not authorized for authentication in the DID document of %s", c.Signature.KeyID, c.Signature.SignerDID)
	}
	pub, err := vm.PublicKey()
	if err != nil {
		return did.PublicKey{}, &Error{Status: 401, Code: CodeKeyNotFound, Message: fmt.Sprintf("key %s has no usable public key: %v", c.Signature.KeyID, err), Err: err}
	}
	for _, cand := range candidates {
		if pub.Verify(cand.msg, sig) == nil {
			return pub, nil
		}
	}
	return did.PublicKey{}, fail(CodeBadSignature, "the signature does not verify with key %s", c.Signature.KeyID)
}

func resolveError(signer string, err error) *Error {
	switch {
	case errors.Is(err, did.ErrUnsupportedMethod):
		return &Error{Status: 401, Code: CodeUnsupportedMethod, Message: fmt.Sprintf("cannot resolve %s: its DID method is not supported (did:key, did:nostr, did:web are)", signer), Err: err}
	case errors.Is(err, did.ErrInvalid):
		return &Error{Status: 401, Code: CodeMalformed, Message: fmt.Sprintf("signer_did %s: %v", signer, err), Err: err}
	default:
		return &Error{Status: 401, Code: CodeUnresolvable, Message: fmt.Sprintf("cannot resolve %s: %v", signer, err), Err: err}
	}
}

// allowed reports whether an authenticated DID may go on.
func (v *Verifier) allowed(d string) bool {
	if v.opts.Allowed != nil {
		return v.opts.Allowed(d)
	}
	if v.allow == nil {
		return true
	}
	p, err := did.Principal(d)
	return err == nil && v.allow[p]
}

func (v *Verifier) authRequired() bool {
	return v.opts.RequireAuth || v.opts.Allowed != nil || v.allow != nil
}

type callerKey struct{}

type keyKey struct{}

// Key is the key a request was verified with: the caller's DID, the id of
// the verification method (a DID URL under it) and its public key. A
// payment channel's receipts are signed with it (package payments/channel).
type Key struct {
	DID    string
	ID     string
	Public did.PublicKey
}

// CallerKey returns the key the request was verified with, when the
// Middleware verified it.
func CallerKey(ctx context.Context) (Key, bool) {
	k, ok := ctx.Value(keyKey{}).(Key)
	return k, ok
}

// Caller returns the DID the request was verified as, when it was.
func Caller(ctx context.Context) (string, bool) {
	d, ok := ctx.Value(callerKey{}).(string)
	return d, ok
}

// WithCaller returns ctx carrying did as the verified caller: for
// transports that authenticate by other means and tests.
func WithCaller(ctx context.Context, did string) context.Context {
	return context.WithValue(ctx, callerKey{}, did)
}

// Middleware verifies every request before next: 401 (and 403 for a DID
// not allowed, 413, 503) with a JSON body {"code","message"}; otherwise
// next runs with the verified DID in the request's context (Caller, and its
// key CallerKey) and the body, already read, still readable. Requests without an Authorization
// header pass unauthenticated unless authentication is required (see
// Options.RequireAuth).
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" && !v.authRequired() {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(w, r, v.opts.MaxBody)
		if err != nil {
			v.refuse(w, r, err)
			return
		}
		k, err := v.verify(r.Context(), h, Request{Method: r.Method, Path: r.URL.RequestURI(), Body: body, URL: requestURL(r)})
		if err != nil {
			v.refuse(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(WithCaller(r.Context(), k.DID), keyKey{}, k))
		next.ServeHTTP(w, r)
	})
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	r.Body.Close()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge, Message: fmt.Sprintf("request body larger than %d bytes", limit)}
		}
		return nil, &Error{Status: http.StatusBadRequest, Code: CodeMalformed, Message: "could not read the request body: " + err.Error(), Err: err}
	}
	r.Body = readCloser{bytes.NewReader(buf.Bytes())}
	return buf.Bytes(), nil
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// requestURL is the endpoint URL a request was sent to, without its query.
func requestURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}

func (v *Verifier) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusUnauthorized, Code: CodeMalformed, Message: err.Error()}
	}
	v.opts.Logger.Debug("DIDAuthV1 refused", "code", e.Code, "status", e.Status, "method", r.Method, "path", r.URL.Path, "err", e.Message)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", Scheme)
	}
	WriteError(w, e)
}

// WriteError writes e as the Middleware does: its status and
// {"code","message"}.
func WriteError(w http.ResponseWriter, e *Error) {
	httpserve.WriteError(w, e.Status, e.Code, e.Message)
}
