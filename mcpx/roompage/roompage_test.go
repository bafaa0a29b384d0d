package roompage

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/internal/webui"
)

func TestHandler_ServesThePageWithItsHeadersToLoopbackOnly(t *testing.T) {
	h := Handler([]string{"rooms.example.com"})
	for _, c := range []struct {
		host, path string
		status     int
		has        string
	}{
		{"127.0.0.1:7070", "/", 200, `id="token" type="password"`},
		{"rooms.example.com", "/", 200, "<title>MCPx room"},
		{"127.0.0.1:7070", "/ui/room.js", 200, "bearer."},
		{"127.0.0.1:7070", "/ui/dom.js", 200, "var cvmui"},
		{"evil.example:7070", "/", 421, webui.CodeBadHost},
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.has) {
			t.Errorf("%s %s: %d, body without %q", c.host, c.path, w.Code, c.has)
		}
		if c.status == 200 && w.Header().Get("Content-Security-Policy") != webui.CSP {
			t.Errorf("%s: CSP %q", c.path, w.Header().Get("Content-Security-Policy"))
		}
	}
	// The token field is never submitted (no name), so a form submitted
	// without the script cannot put it in a URL.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/", nil))
	if page := w.Body.String(); strings.Contains(page, `name="token"`) || !strings.Contains(page, `method="post"`) {
		t.Error("the join form could send the token in a URL")
	}
}
