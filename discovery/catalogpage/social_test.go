package catalogpage

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/social"
)

// fakeSocial records the reviews posted; the browser tests in cmd/cvm
// use the real one, on a relay.
type fakeSocial struct {
	mu     sync.Mutex
	posted []ReviewRequest
}

func (f *fakeSocial) About(context.Context, nostr.PubKey) (About, error) {
	return About{Profile: &social.Profile{Name: "<b>n</b>"}, Notes: []social.Note{}, Reviewer: "npub1op"}, nil
}

func (f *fakeSocial) PostReview(_ context.Context, r ReviewRequest) (nostr.ID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.posted = append(f.posted, r)
	return nostr.ID{7}, nil
}

func (f *fakeSocial) n() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.posted) }

func newSocialPage(t *testing.T) (*Page, *fakeSocial, nostr.PubKey, *httptest.Server) {
	t.Helper()
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	announce(t, c, sk, "", nostr.Tags{{"t", "math"}})
	fs := &fakeSocial{}
	p, err := New(Options{Catalog: c, Social: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { p.Close(); srv.Close() })
	return p, fs, sk.Public(), srv
}

// TestReview_GuardedAndConfirmedLikeTryIt: a review is published only
// from the page (origin, token, JSON), only after a confirmation whose
// quote is for exactly that review, and only once.
func TestReview_GuardedAndConfirmedLikeTryIt(t *testing.T) {
	p, fs, pk, srv := newSocialPage(t)
	tok := p.pageToken()
	review := `{"server":"` + pk.Hex() + `","content":"good","rating":4}`

	for name, mod := range map[string]func(*http.Request){
		"other origin": func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") },
		"no token":     func(r *http.Request) { r.Header.Del(tokenHeader) },
		"a form":       func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") },
	} {
		if status, body := postTo(t, srv, "/api/review", tok, review, mod); status < 400 {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	status, body := postTo(t, srv, "/api/review", tok, review, nil)
	var q struct{ Code, Quote, Message string }
	if status != http.StatusAccepted || json.Unmarshal([]byte(body), &q) != nil || q.Code != CodeConfirmReview || q.Quote == "" || fs.n() != 0 {
		t.Fatalf("unconfirmed review: %d %s (posted %d)", status, body, fs.n())
	}
	// The quote is for this review only (and a wrong use spends it).
	other := `{"server":"` + pk.Hex() + `","content":"bad","rating":1,"quote":"` + q.Quote + `"}`
	if status, body := postTo(t, srv, "/api/review", tok, other, nil); status != http.StatusConflict || fs.n() != 0 {
		t.Fatalf("another review with the quote: %d %s", status, body)
	}
	_, body = postTo(t, srv, "/api/review", tok, review, nil)
	if json.Unmarshal([]byte(body), &q) != nil || q.Quote == "" {
		t.Fatalf("a second confirmation: %s", body)
	}
	status, body = postTo(t, srv, "/api/review", tok, strings.TrimSuffix(review, "}")+`,"quote":"`+q.Quote+`"}`, nil)
	if status != http.StatusCreated || fs.n() != 1 || fs.posted[0].Rating != 4 || fs.posted[0].Content != "good" || fs.posted[0].Server != pk {
		t.Fatalf("confirmed review: %d %s %+v", status, body, fs.posted)
	}
	if status, _ := postTo(t, srv, "/api/review", tok, strings.TrimSuffix(review, "}")+`,"quote":"`+q.Quote+`"}`, nil); status != http.StatusConflict || fs.n() != 1 {
		t.Fatalf("a quote used twice: %d, posted %d", status, fs.n())
	}
	for _, bad := range []string{
		`{"server":"` + pk.Hex() + `","content":"  "}`,
		`{"server":"` + pk.Hex() + `","content":"x","rating":6}`,
		`{"server":"` + pk.Hex() + `","content":"` + strings.Repeat("x", social.MaxReviewContent+1) + `"}`,
		`{"server":"` + strings.Repeat("ab", 32) + `","content":"x"}`,
		`{"server":"zz","content":"x"}`,
	} {
		if status, body := postTo(t, srv, "/api/review", tok, bad, nil); status < 400 || status == http.StatusConflict {
			t.Errorf("%.60s: %d %s", bad, status, body)
		}
	}
}

func TestPages_SchemaAndCategoryServeTheCatalog(t *testing.T) {
	_, _, pk, srv := newSocialPage(t)
	for path, want := range map[string]int{
		"/schema/" + strings.Repeat("a", 64):                 200,
		"/schema/7c61a4":                                     200,
		"/schema/not-hex":                                    404,
		"/schema/" + strings.Repeat("a", 65):                 404,
		"/category/math":                                     200,
		"/category/" + strings.Repeat("x", maxCategoryLen+1): 404,
		"/api/about/" + pk.Hex():                             200,
		"/api/about/" + strings.Repeat("ab", 32):             404,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %.40s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
