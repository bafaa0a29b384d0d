package webui

import (
	"embed"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strings"

	"github.com/cvmgo/cvm/internal/httpserve"
)

// shared is the script and style every page loads, under /ui/.
//
//go:embed assets
var shared embed.FS

// Codes of the JSON errors the pages' servers answer with (listed in
// docs/error-codes.md).
const (
	CodeBadHost          = "bad_host"           // 421: the Host header names another server
	CodeNotFound         = "not_found"          // 404: no such page or endpoint
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeInternal         = "internal"           // 500
)

// CSP is the Content-Security-Policy of every page: scripts, styles and
// connections from cvm's own origin only, images from it or data: URLs
// (tool results carry images inline), no frames, no plugins, forms posting
// only back to cvm.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// SetHeaders sets the security headers of a page or asset response.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// Pages serves a page: its index.html at "/", and under /ui/ its own
// files and then the shared ones, with SetHeaders on every answer.
type Pages struct {
	page, shared fs.FS
}

// NewPages serves page, a file system holding index.html and the page's
// other files at its root.
func NewPages(page fs.FS) *Pages {
	sub, err := fs.Sub(shared, "assets")
	if err != nil {
		panic(err) // the embedded directory exists: a build error otherwise
	}
	return &Pages{page: page, shared: sub}
}

// ServeHTTP answers GET and HEAD for "/" and /ui/NAME; anything else is a
// 404 (or 405) in JSON.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SetHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "pages are read with GET")
		return
	}
	name := "index.html"
	if r.URL.Path != "/" {
		n, ok := strings.CutPrefix(r.URL.Path, "/ui/")
		if !ok || !fs.ValidPath(n) || strings.Contains(n, "/") || n == "index.html" {
			WriteError(w, http.StatusNotFound, CodeNotFound, "no page at "+r.URL.Path+"; the page is at /")
			return
		}
		name = n
	}
	for _, fsys := range []fs.FS{p.page, p.shared} {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			continue
		}
		switch path.Ext(name) {
		case ".html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		case ".js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		case ".css":
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
		case ".png":
			w.Header().Set("Content-Type", "image/png")
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(data)
		}
		return
	}
	WriteError(w, http.StatusNotFound, CodeNotFound, "no file "+r.URL.Path)
}

// WriteError answers a refused request with the JSON body every cvm HTTP
// endpoint refuses with, {"code": code, "message": what to do} (see
// httpserve.WriteError), and keeps it out of caches: the pages' answers
// depend on the page token and the catalog's state.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	httpserve.WriteError(w, status, code, msg)
}

// HostAllowed reports whether a request's Host header names this server:
// a loopback name or address, or one of extra (patterns as in path.Match,
// e.g. "*.example.com"; compared without the port). A DNS-rebinding page
// reaches a loopback server under its own host name, which this refuses.
func HostAllowed(host string, extra []string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "."), "["), "]"))
	if h == "" {
		return false
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, p := range extra {
		if ok, _ := path.Match(strings.ToLower(p), h); ok {
			return true
		}
	}
	return false
}

// CheckHost wraps next with HostAllowed: a request naming another host is
// refused with 421 Misdirected Request.
func CheckHost(next http.Handler, extra []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, extra) {
			WriteError(w, http.StatusMisdirectedRequest, CodeBadHost,
				"Host "+r.Host+" is not this server; open the page at its loopback address, or allow the name with --allow-host")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SameOrigin reports whether a state-changing request came from this
// server's own page: its Origin (or, without one, its Referer) names the
// request's Host, and the browser did not mark it cross-site.
func SameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" || o == "null" {
		return false
	}
	rest, ok := strings.CutPrefix(o, "http://")
	if !ok {
		if rest, ok = strings.CutPrefix(o, "https://"); !ok {
			return false
		}
	}
	host, _, _ := strings.Cut(rest, "/")
	return strings.EqualFold(host, r.Host)
}
