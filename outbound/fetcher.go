package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"syscall"
	"time"
)

// Options configure a Fetcher. Zero values take the defaults beside them.
type Options struct {
	// Timeout bounds one fetch whole: dialling, TLS, every redirect, the
	// headers and the body (default 10 s), so that a server trickling its
	// answer byte by byte holds a fetch no longer than that.
	Timeout time.Duration
	// MaxBytes bounds a body whose Request sets no bound (default 1 MiB).
	MaxBytes int64
	// MaxRedirects bounds the redirects of a Request that follows them
	// (default 5).
	MaxRedirects int
	// UserAgent is sent with every request (default "cvm").
	UserAgent string

	// Allow lists exact addresses (IP and port, as dialled) that are
	// fetched from although they are not public. It exists for tests,
	// whose servers listen on loopback: list each by its listener's
	// address (package outboundtest does), and a redirect to any other
	// port of the same host is still refused. There is deliberately no
	// way to allow a range: a switch that opens every private address
	// tends to stay on.
	Allow []netip.AddrPort
	// ExtraRoots are certificate authorities trusted besides the system's,
	// for tests' TLS servers (httptest.Server.Certificate).
	ExtraRoots []*x509.Certificate
}

// A Fetcher makes GET requests to URLs that strangers chose: announced
// pictures, did:web documents, and the like. It is safe for concurrent
// use and holds no connections between fetches.
type Fetcher struct {
	opts      Options
	allow     []netip.AddrPort // unmapped
	transport *http.Transport
}

// New returns a Fetcher for opts.
func New(opts Options) *Fetcher {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	if opts.MaxRedirects <= 0 {
		opts.MaxRedirects = 5
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "cvm"
	}
	f := &Fetcher{opts: opts}
	for _, ap := range opts.Allow {
		f.allow = append(f.allow, unmap(ap))
	}
	var roots *x509.CertPool // nil: the system's
	if len(opts.ExtraRoots) > 0 {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			roots = x509.NewCertPool()
		}
		for _, c := range opts.ExtraRoots {
			roots.AddCert(c)
		}
	}
	// The address is judged in Control, once DNS has answered and right
	// before the socket connects to it: there is no second lookup for a
	// rebinding name to answer differently, every address tried (IPv4
	// and IPv6) is judged, and so is every redirect's.
	dialer := &net.Dialer{Control: f.control}
	f.transport = &http.Transport{
		// No proxy from the environment: the proxy's address would be
		// judged instead of the host's.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    opts.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
		// Strangers' URLs rarely repeat a host soon; without idle
		// connections no goroutine outlives a fetch.
		DisableKeepAlives: true,
	}
	return f
}

// Request is one GET.
type Request struct {
	URL string
	// Accept lists the media types the answer may declare in its
	// Content-Type, parameters aside: "type/subtype", "type/*", or
	// "type/*+suffix" (application/*+json); an answer declaring another
	// type, or none, is refused with ErrContentType before its body is
	// read. Empty: any type (GetJSON and GetImage have their own default).
	Accept []string
	// MaxBytes bounds the body (default Options.MaxBytes).
	MaxBytes int64
	// FollowRedirects follows up to Options.MaxRedirects redirects, each
	// target held to the rules of the first URL. Without it a redirect is
	// an error (ErrRedirected), as for documents that must come from the
	// host named (did:web, NIP-05).
	FollowRedirects bool
	// HTTPSOnly refuses plain http, on the first hop and after redirects.
	// (A redirect from https to http is refused anyway.)
	HTTPSOnly bool
}

// Response is a body fetched whole.
type Response struct {
	URL         string // where the body came from, after redirects
	ContentType string // its media type, lower case, without parameters
	Body        []byte
}

// Get fetches req.URL and reads its body whole. The error wraps one of the
// package's sentinel errors, or the context's.
func (f *Fetcher) Get(ctx context.Context, req Request) (*Response, error) {
	u, err := f.parseURL(req.URL, req.HTTPSOnly)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if h := acceptHeader(req.Accept); h != "" {
		hr.Header.Set("Accept", h)
	}
	hr.Header.Set("User-Agent", f.opts.UserAgent)
	client := &http.Client{Transport: f.transport, CheckRedirect: f.redirectPolicy(req)}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, f.failure(ctx, fctx, u.String(), err)
	}
	defer resp.Body.Close()
	res, err := f.read(resp, req)
	if err != nil {
		return nil, f.failure(ctx, fctx, resp.Request.URL.String(), err)
	}
	return res, nil
}

// control judges each address the dialer is about to connect to.
func (f *Fetcher) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dialling %q", ErrNotPublic, address)
	}
	return f.checkAddr(ap)
}

func (f *Fetcher) checkAddr(ap netip.AddrPort) error {
	ap = unmap(ap)
	if IsPublic(ap.Addr()) || slices.Contains(f.allow, ap) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotPublic, ap)
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// redirectPolicy holds each redirect of req to the rules of its first URL,
// and bounds them.
func (f *Fetcher) redirectPolicy(req Request) func(*http.Request, []*http.Request) error {
	return func(next *http.Request, via []*http.Request) error {
		if !req.FollowRedirects {
			return http.ErrUseLastResponse
		}
		if len(via) > f.opts.MaxRedirects {
			return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, f.opts.MaxRedirects)
		}
		to := next.URL.String()
		for _, v := range via {
			if v.URL.String() == to {
				return fmt.Errorf("%w: back to %s", ErrRedirectLoop, next.URL.Redacted())
			}
		}
		if len(to) > MaxURLLength {
			return fmt.Errorf("%w: redirect longer than %d bytes", ErrBadURL, MaxURLLength)
		}
		if via[len(via)-1].URL.Scheme == "https" && next.URL.Scheme == "http" {
			return fmt.Errorf("%w: redirect from https to http", ErrScheme)
		}
		return f.checkURL(next.URL, req.HTTPSOnly)
	}
}

// read checks the answer's status, type and size before it takes the body.
func (f *Fetcher) read(resp *http.Response, req Request) (*Response, error) {
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode/100 == 3 && !req.FollowRedirects {
		return nil, fmt.Errorf("%w: %s to %.200q", ErrRedirected, resp.Status, loc)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s", ErrStatus, resp.Status)
	}
	mt := mediaType(resp.Header.Get("Content-Type"))
	if len(req.Accept) > 0 && !accepts(req.Accept, mt) {
		return nil, fmt.Errorf("%w: %q, want %q", ErrContentType, mt, req.Accept)
	}
	limit := req.MaxBytes
	if limit <= 0 {
		limit = f.opts.MaxBytes
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes announced, at most %d", ErrTooLarge, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return &Response{URL: resp.Request.URL.String(), ContentType: mt, Body: body}, nil
}

// failure says where a fetch failed and why: the caller's context ended,
// the fetch ran out of time, or err, whichever came first.
func (f *Fetcher) failure(caller, fetch context.Context, where string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		// ue.URL is the hop that failed; for a refused redirect, the
		// Location as sent, which may be relative.
		if u, perr := url.Parse(ue.URL); perr == nil && u.IsAbs() {
			where = ue.URL
		} else {
			where += " (redirected to " + ue.URL + ")"
		}
		err = ue.Err
	}
	switch {
	case caller.Err() != nil:
		err = context.Cause(caller)
	case fetch.Err() != nil:
		err = fmt.Errorf("%w after %v", ErrTimeout, f.opts.Timeout)
	}
	return fmt.Errorf("GET %.300s: %w", where, err)
}
