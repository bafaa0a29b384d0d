package didauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cvmgo/cvm/did"
)

// Transport is an http.RoundTripper that signs every request with Signer
// before Base sends it: POSTs over their body, GETs and DELETEs over an
// empty one. The request given is not modified. A Transport must not be
// copied after first use.
type Transport struct {
	// Base sends the signed request (default http.DefaultTransport).
	Base http.RoundTripper
	// Signer signs as the client's DID.
	Signer did.Signer
	// Audience is the server signed for: its MCP endpoint URL or DID.
	// Empty: each request's URL without its query.
	Audience string
	// Mode is Strict (default) or Compat, which makes the headers of
	// @nuwa-ai/identity-kit 0.6.0 (for servers built on it).
	Mode Mode
	// Now is the clock for timestamps (default time.Now).
	Now func() time.Time
	// Logger receives, once, the warning that compatibility mode signs
	// less than the request (default slog.Default()).
	Logger *slog.Logger

	compatWarning sync.Once
}

// RoundTrip signs req and sends it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Signer == nil {
		return nil, errors.New("didauth: Transport has no Signer")
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("didauth: read request body: %w", err)
		}
		body = b
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	u := *req.URL
	u.RawQuery, u.Fragment = "", ""
	aud := t.Audience
	if aud == "" {
		aud = u.String()
	}
	var header string
	var err error
	if t.Mode == Compat {
		t.compatWarning.Do(func() {
			log := t.Logger
			if log == nil {
				log = slog.Default()
			}
			log.Warn("DIDAuthV1 compatibility mode: requests are signed as @nuwa-ai/identity-kit 0.6.0 signs them, "+
				"which does not cover the method, URL or body; a captured header can be replayed with other parameters within its time window",
				"did", t.Signer.DID())
		})
		header, err = Sign(req.Context(), t.Signer, KitPayload(req.Method, req.URL.String(), aud, NewNonce(), now().Unix()), Compat)
	} else {
		header, err = SignPayload(req.Context(), t.Signer, Payload{
			Audience:   aud,
			BodySHA256: BodyHash(body),
			Method:     req.Method,
			Nonce:      NewNonce(),
			Path:       req.URL.RequestURI(),
			Timestamp:  now().Unix(),
		})
	}
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}
	out.Header.Set("Authorization", header)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(out)
}
