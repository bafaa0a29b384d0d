package outbound_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// counted is a test server that counts the requests reaching it.
type counted struct {
	*httptest.Server
	hits atomic.Int32
}

func serve(t *testing.T, h http.HandlerFunc) *counted {
	t.Helper()
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func port(s *httptest.Server) string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

func ok(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"ok":true}`)
}

func get(f *outbound.Fetcher, url string) error {
	_, err := f.Get(context.Background(), outbound.Request{URL: url, FollowRedirects: true})
	return err
}

// TestGet_RefusesLoopbackAndPrivateAddresses: without an allow-list, no
// request reaches a loopback server however it is named, and literal
// private addresses are refused without a dial.
func TestGet_RefusesLoopbackAndPrivateAddresses(t *testing.T) {
	srv := serve(t, ok)
	p := port(srv.Server)
	var v6hits atomic.Int32
	v6 := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { v6hits.Add(1) }))
	l6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	v6.Listener = l6
	v6.Start()
	defer v6.Close()
	f := outbound.New(outbound.Options{})
	for _, u := range []string{
		srv.URL,                                // 127.0.0.1
		"http://localhost:" + p + "/",          // a name, judged by what it resolves to
		"http://0.0.0.0:" + p + "/",            // reaches loopback on Linux
		"http://[::ffff:127.0.0.1]:" + p + "/", // IPv4-mapped IPv6
		"http://[::1]:" + port(v6) + "/",
		"http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.0.1/", "http://100.64.0.1/",
		"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[fc00::1]/",
		"http://224.0.0.1/", "http://[ff02::1]/", "http://192.0.2.1/", "http://198.18.0.1/", "http://[2001:db8::1]/",
	} {
		if err := get(f, u); !errors.Is(err, outbound.ErrNotPublic) {
			t.Errorf("%s: %v, want ErrNotPublic", u, err)
		}
	}
	if srv.hits.Load() != 0 || v6hits.Load() != 0 {
		t.Fatalf("%d and %d requests reached loopback servers", srv.hits.Load(), v6hits.Load())
	}
}

// TestGet_AllowListIsExact: a test allows its server's address and no
// other, not even another port of the same host.
func TestGet_AllowListIsExact(t *testing.T) {
	a, b := serve(t, ok), serve(t, ok)
	f := outboundtest.Allowing(a.Server)
	if err := get(f, a.URL); err != nil {
		t.Fatalf("allowed server: %v", err)
	}
	if err := get(f, b.URL); !errors.Is(err, outbound.ErrNotPublic) || b.hits.Load() != 0 {
		t.Fatalf("another port: %v, %d requests", err, b.hits.Load())
	}
	if err := get(f, "http://localhost:"+port(a.Server)+"/"); err != nil {
		t.Fatalf("the allowed address by name: %v", err)
	}
}

// TestGet_RedirectToPrivateIsRefused: the allowed origin stands for a
// public host; redirects from it to loopback (another port), to a name
// resolving there, or to a metadata address are refused, and nothing
// reaches the target.
func TestGet_RedirectToPrivateIsRefused(t *testing.T) {
	target := serve(t, ok)
	var to string
	origin := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) })
	f := outboundtest.Allowing(origin.Server)
	for _, to = range []string{target.URL + "/x", "http://localhost:" + port(target.Server) + "/x", "http://169.254.169.254/", "http://[::ffff:7f00:1]:" + port(target.Server) + "/"} {
		if err := get(f, origin.URL); !errors.Is(err, outbound.ErrNotPublic) {
			t.Errorf("redirect to %s: %v", to, err)
		}
	}
	if target.hits.Load() != 0 {
		t.Fatalf("%d requests reached the private target", target.hits.Load())
	}
}

// TestGet_RedirectsAreBounded: redirects are followed only when asked, at
// most MaxRedirects, never in a loop, never to another scheme or with
// credentials.
func TestGet_RedirectsAreBounded(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ok":
			ok(w, r)
		case strings.HasPrefix(r.URL.Path, "/chain/"):
			var n int
			fmt.Sscanf(r.URL.Path, "/chain/%d", &n)
			to := fmt.Sprintf("/chain/%d", n-1)
			if n == 1 {
				to = "/ok"
			}
			http.Redirect(w, r, to, http.StatusFound)
		case r.URL.Path == "/a":
			http.Redirect(w, r, "/b", http.StatusMovedPermanently)
		case r.URL.Path == "/b":
			http.Redirect(w, r, "/a", http.StatusMovedPermanently)
		default:
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
		}
	})
	f := outbound.New(outbound.Options{MaxRedirects: 3, Allow: []netip.AddrPort{netip.MustParseAddrPort(srv.Listener.Addr().String())}})
	hostport := srv.Listener.Addr().String()
	for _, c := range []struct {
		path string
		want error
	}{
		{"/chain/3", nil},
		{"/chain/4", outbound.ErrTooManyRedirects},
		{"/a", outbound.ErrRedirectLoop},
		{"/to?to=ftp://" + hostport + "/x", outbound.ErrScheme},
		{"/to?to=file:///etc/passwd", outbound.ErrScheme},
		{"/to?to=http://user:secret@" + hostport + "/ok", outbound.ErrCredentials},
	} {
		if err := get(f, srv.URL+c.path); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.path, err, c.want)
		}
	}
	hits := srv.hits.Load()
	_, err := f.Get(context.Background(), outbound.Request{URL: srv.URL + "/chain/1"})
	if !errors.Is(err, outbound.ErrRedirected) || srv.hits.Load() != hits+1 {
		t.Fatalf("a redirect not to be followed: %v, %d requests", err, srv.hits.Load()-hits)
	}
}

// TestGet_HTTPSWithATrustedTestRoot: a TLS test server is reached with its
// certificate added to the roots; a redirect from it to plain http is
// refused, and so is plain http when the request wants HTTPS.
func TestGet_HTTPSWithATrustedTestRoot(t *testing.T) {
	plain := serve(t, ok)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Redirect(w, r, plain.URL, http.StatusFound)
			return
		}
		ok(w, r)
	}))
	defer tlsSrv.Close()
	f := outboundtest.Allowing(tlsSrv, plain.Server)
	var v struct{ OK bool }
	if err := f.GetJSON(context.Background(), outbound.Request{URL: tlsSrv.URL, HTTPSOnly: true}, &v); err != nil || !v.OK {
		t.Fatalf("https: %v, %+v", err, v)
	}
	if err := get(f, tlsSrv.URL+"/down"); !errors.Is(err, outbound.ErrScheme) {
		t.Errorf("https to http: %v", err)
	}
	if _, err := f.Get(context.Background(), outbound.Request{URL: plain.URL, HTTPSOnly: true}); !errors.Is(err, outbound.ErrScheme) {
		t.Errorf("http where https is wanted: %v", err)
	}
	if plain.hits.Load() != 0 {
		t.Errorf("%d requests reached the plain server", plain.hits.Load())
	}
	untrusted := outbound.New(outbound.Options{Allow: []netip.AddrPort{netip.MustParseAddrPort(tlsSrv.Listener.Addr().String())}})
	if err := get(untrusted, tlsSrv.URL); err == nil || errors.Is(err, outbound.ErrNotPublic) {
		t.Errorf("an untrusted certificate: %v", err)
	}
}

// TestGet_RefusesURLsItDoesNotFetch: schemes, credentials and malformed
// URLs are refused before any request.
func TestGet_RefusesURLsItDoesNotFetch(t *testing.T) {
	srv := serve(t, ok)
	hostport := srv.Listener.Addr().String()
	f := outboundtest.Allowing(srv.Server)
	for u, want := range map[string]error{
		"ftp://" + hostport + "/x":           outbound.ErrScheme,
		"file:///etc/passwd":                 outbound.ErrScheme,
		"javascript:alert(1)":                outbound.ErrScheme,
		"gopher://" + hostport + "/":         outbound.ErrScheme,
		"data:image/png;base64,AAAA":         outbound.ErrScheme,
		"http://user:pass@" + hostport + "/": outbound.ErrCredentials,
		"http://user@" + hostport + "/":      outbound.ErrCredentials,
		"":                                   outbound.ErrScheme,
		"/relative":                          outbound.ErrScheme,
		"http://":                            outbound.ErrBadURL,
		"http:opaque":                        outbound.ErrBadURL,
		"http://" + hostport + "/" + strings.Repeat("a", outbound.MaxURLLength): outbound.ErrBadURL,
		"http://%zz/":           outbound.ErrBadURL,
		"http://1.2.3.4:99999/": outbound.ErrBadURL,
	} {
		if err := get(f, u); !errors.Is(err, want) {
			t.Errorf("%.60q: %v, want %v", u, err, want)
		}
		if err := f.CheckURL(u); !errors.Is(err, want) {
			t.Errorf("CheckURL(%.60q): %v, want %v", u, err, want)
		}
	}
	if srv.hits.Load() != 0 {
		t.Fatalf("%d requests made", srv.hits.Load())
	}
	if err := f.CheckURL(srv.URL + "/pic.png"); err != nil {
		t.Fatalf("an allowed URL: %v", err)
	}
}

// TestGet_BoundsTheBody: a body over the limit is refused, announced or
// not; status and type are checked before it is read.
func TestGet_BoundsTheBody(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/announced":
			w.Header().Set("Content-Length", "101")
			w.Write(make([]byte, 101))
		case "/chunked":
			for range 5 {
				w.Write(make([]byte, 30))
				w.(http.Flusher).Flush()
			}
		case "/exact":
			w.Write(make([]byte, 100))
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html></html>")
		case "/untyped":
			w.Header()["Content-Type"] = nil
			fmt.Fprint(w, "{}")
		default:
			http.NotFound(w, r)
		}
	})
	f := outbound.New(outbound.Options{MaxBytes: 100, Allow: []netip.AddrPort{netip.MustParseAddrPort(srv.Listener.Addr().String())}})
	for path, want := range map[string]error{
		"/announced": outbound.ErrTooLarge,
		"/chunked":   outbound.ErrTooLarge,
		"/exact":     nil,
		"/html":      outbound.ErrContentType,
		"/untyped":   outbound.ErrContentType,
		"/missing":   outbound.ErrStatus,
	} {
		_, err := f.Get(context.Background(), outbound.Request{URL: srv.URL + path, Accept: []string{"application/json"}})
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", path, err, want)
		}
	}
	if _, err := f.Get(context.Background(), outbound.Request{URL: srv.URL + "/exact", MaxBytes: 99}); !errors.Is(err, outbound.ErrTooLarge) {
		t.Errorf("the request's own limit: %v", err)
	}
}

// TestGet_SlowLorisEndsAtTheTimeout: a server that trickles its headers or
// its body holds a fetch no longer than Options.Timeout; the caller's own
// cancellation is told apart from the timeout.
func TestGet_SlowLorisEndsAtTheTimeout(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/silent" {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		// The pacing is the behaviour under test: a byte at a time, each
		// well within any read timeout, never finishing.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	})
	f := outbound.New(outbound.Options{Timeout: 300 * time.Millisecond, MaxBytes: 1 << 20,
		Allow: []netip.AddrPort{netip.MustParseAddrPort(srv.Listener.Addr().String())}})
	for _, path := range []string{"/trickle", "/silent"} {
		if err := get(f, srv.URL+path); !errors.Is(err, outbound.ErrTimeout) {
			t.Errorf("%s: %v, want ErrTimeout", path, err)
		}
	}
}

// TestGet_CallersCancellationIsNoTimeout: a fetch the caller cancels ends
// with the caller's error, not ErrTimeout.
func TestGet_CallersCancellationIsNoTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := serve(t, func(_ http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	_, err := outboundtest.Allowing(srv.Server).Get(ctx, outbound.Request{URL: srv.URL})
	if !errors.Is(err, context.Canceled) || errors.Is(err, outbound.ErrTimeout) {
		t.Fatalf("cancelled by the caller: %v", err)
	}
}

// TestGetImage_TheBytesDecide: only raster images, declared as images and
// shown to be by their bytes.
func TestGetImage_TheBytesDecide(t *testing.T) {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 1, 1)))
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(buf.Bytes())
		case "/mislabelled":
			w.Header().Set("Content-Type", "image/jpeg")
			w.Write(buf.Bytes())
		case "/as-html":
			w.Header().Set("Content-Type", "text/html")
			w.Write(buf.Bytes())
		case "/html":
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "<html><script>alert(1)</script></html>")
		case "/svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
		}
	})
	f := outboundtest.Allowing(srv.Server)
	for path, want := range map[string]string{"/png": "image/png", "/mislabelled": "image/png", "/as-html": "", "/html": "", "/svg": ""} {
		res, err := f.GetImage(context.Background(), outbound.Request{URL: srv.URL + path})
		switch {
		case want == "" && !errors.Is(err, outbound.ErrContentType):
			t.Errorf("%s: %v, want ErrContentType", path, err)
		case want != "" && (err != nil || res.ContentType != want || !bytes.Equal(res.Body, buf.Bytes())):
			t.Errorf("%s: %v, %+v", path, err, res)
		}
	}
}

// TestGetJSON_DecodesJSONTypesOnly: JSON and +json types decode; a body
// that is not JSON is ErrBadBody.
func TestGetJSON_DecodesJSONTypesOnly(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", strings.TrimPrefix(r.URL.Path, "/"))
		if r.URL.Query().Has("bad") {
			fmt.Fprint(w, `{"a":`)
			return
		}
		fmt.Fprint(w, `{"a":1}`)
	})
	f := outboundtest.Allowing(srv.Server)
	for path, want := range map[string]error{
		"/application/json":                nil,
		"/application/did+json":            nil,
		"/application/json?bad":            outbound.ErrBadBody,
		"/text/html":                       outbound.ErrContentType,
		"/text/plain":                      outbound.ErrContentType,
		"/application/json; charset=utf-8": nil,
	} {
		var v struct{ A int }
		err := f.GetJSON(context.Background(), outbound.Request{URL: srv.URL + path}, &v)
		if !errors.Is(err, want) || (want == nil) != (err == nil) || (err == nil && v.A != 1) {
			t.Errorf("%s: %v %+v, want %v", path, err, v, want)
		}
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://example.com/a.png", "http://127.0.0.1:80/", "http://u:p@h/", "ftp://x/", "http://[::ffff:10.0.0.1]/", "http://%zz/"} {
		f.Add(s)
	}
	fetcher := outbound.New(outbound.Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		if fetcher.CheckURL(raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Hostname() == "" || len(raw) > outbound.MaxURLLength {
			t.Fatalf("accepted %q", raw)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !outbound.IsPublic(ip) {
			t.Fatalf("accepted %q, whose address is not public", raw)
		}
	})
}
