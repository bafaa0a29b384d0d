package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHostAllowed(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:9": true, "127.0.0.2": true, "app.localhost:80": true,
		"LOCALHOST.:80": true, "evil.example:8080": false, "": false, "10.0.0.1:80": false,
		"127.0.0.1.evil.example": false, "cvm.example.com": true, "x.cvm.example.com": false,
	} {
		if got := HostAllowed(host, []string{"cvm.example.com"}); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		origin, referer, site string
		want                  bool
	}{
		{"http://127.0.0.1:7000", "", "same-origin", true},
		{"http://127.0.0.1:7000", "", "", true},
		{"", "http://127.0.0.1:7000/x?y", "", true},
		{"https://evil.example", "", "cross-site", false},
		{"http://127.0.0.1:7000", "", "cross-site", false}, // a browser's own word wins
		{"http://127.0.0.1:7001", "", "", false},
		{"null", "", "", false},
		{"", "", "", false},
		{"ftp://127.0.0.1:7000", "", "", false},
	} {
		r := httptest.NewRequest("POST", "http://127.0.0.1:7000/api/call", nil)
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.referer != "" {
			r.Header.Set("Referer", c.referer)
		}
		if c.site != "" {
			r.Header.Set("Sec-Fetch-Site", c.site)
		}
		if got := SameOrigin(r); got != c.want {
			t.Errorf("%+v: SameOrigin = %v", c, got)
		}
	}
}

func TestPages_ServeFilesWithHeadersAndRefuseTheRest(t *testing.T) {
	page := fstest.MapFS{"index.html": {Data: []byte("<p>hi</p>")}, "page.js": {Data: []byte("1")}}
	h := CheckHost(NewPages(page), nil)
	for _, c := range []struct {
		method, host, path string
		status             int
		ctype, body        string
	}{
		{"GET", "127.0.0.1:1", "/", 200, "text/html; charset=utf-8", "<p>hi</p>"},
		{"GET", "127.0.0.1:1", "/ui/page.js", 200, "text/javascript; charset=utf-8", "1"},
		{"GET", "127.0.0.1:1", "/ui/dom.js", 200, "text/javascript; charset=utf-8", "var cvmui"},
		{"GET", "127.0.0.1:1", "/ui/base.css", 200, "text/css; charset=utf-8", "box-sizing"},
		{"GET", "127.0.0.1:1", "/ui/../go.mod", 404, "application/json", `{"code":"not_found","message":"no page at /ui/../go.mod; the page is at /"}`},
		{"GET", "127.0.0.1:1", "/ui/index.html", 404, "application/json", "not_found"},
		{"GET", "127.0.0.1:1", "/elsewhere", 404, "application/json", "not_found"},
		{"POST", "127.0.0.1:1", "/", 405, "application/json", "method_not_allowed"},
		{"GET", "rebound.evil.example:1", "/", 421, "application/json", "bad_host"},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("Content-Type") != c.ctype || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%s %s %s: %d %q %q", c.method, c.host, c.path, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
		if c.status != http.StatusMisdirectedRequest && w.Header().Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: CSP %q", c.path, w.Header().Get("Content-Security-Policy"))
		}
	}
}

func FuzzHostAllowed(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]", "localhost", "evil.example", "[", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		ok := HostAllowed(host, []string{"*.cvm.example"})
		if ok && strings.Contains(strings.ToLower(host), "evil") && !strings.Contains(strings.ToLower(host), "cvm.example") && !strings.Contains(strings.ToLower(host), "localhost") {
			t.Fatalf("HostAllowed(%q)", host)
		}
	})
}
