package room

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Options.Page is served at "/" and under /ui/ only; without it "/" is the
// JSON 404 it always was, and the API keeps its routes either way.
func TestGateway_PageRoutes(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("page " + r.URL.Path)) })
	for _, withPage := range []bool{true, false} {
		opts := Options{Tokens: testKeys(t)}
		if withPage {
			opts.Page = page
		}
		g, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]string{
			"/":            "page /",
			"/ui/room.js":  "page /ui/room.js",
			"/other":       `"code":"not_found"`,
			"/v0/topics":   `"code":"unauthorized"`,
			"/healthz":     `"status":"ok"`,
			"/index.html":  `"code":"not_found"`,
			"/v0/ws/../..": "",
		} {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
			body := w.Body.String()
			if !withPage && strings.HasPrefix(want, "page ") {
				want = `"code":"not_found"`
			}
			if !strings.Contains(body, want) {
				t.Errorf("page %v: GET %s: %d %q, want %q", withPage, path, w.Code, body, want)
			}
		}
		g.Close(context.Background())
	}
}
