package usdrate

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// rateServer answers {"data":{"amount":"<price>"}} and counts its
// requests; hold, when set, is waited on before each answer.
type rateServer struct {
	*httptest.Server
	price    atomic.Value // string
	requests atomic.Int32
	hold     chan struct{}
}

func newRateServer(t *testing.T, price string, hold chan struct{}) *rateServer {
	rs := &rateServer{hold: hold}
	rs.price.Store(price)
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.requests.Add(1)
		if rs.hold != nil {
			<-rs.hold
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":{"amount":%q}}`, rs.price.Load().(string))
	}))
	t.Cleanup(rs.Close)
	return rs
}

func newSource(t *testing.T, rs *rateServer, opts Options) *Source {
	t.Helper()
	opts.URL, opts.Pointer, opts.Fetcher = rs.URL, "/data/amount", outboundtest.Allowing(rs.Server)
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantRate(t *testing.T, s *Source, want string) {
	t.Helper()
	got, err := s.USDPerBTC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := new(big.Rat).SetString(want); got.Cmp(w) != 0 {
		t.Fatalf("rate %s, want %s", got.FloatString(2), want)
	}
}

func TestSource_CachesForTheTTL(t *testing.T) {
	rs := newRateServer(t, "50000", nil)
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	s := newSource(t, rs, Options{TTL: time.Minute, Now: clock})
	wantRate(t, s, "50000")
	rs.price.Store("60000")
	advance(59 * time.Second)
	wantRate(t, s, "50000")
	if n := rs.requests.Load(); n != 1 {
		t.Fatalf("%d fetches within the TTL, want 1", n)
	}
	advance(2 * time.Second)
	wantRate(t, s, "60000")
	if n := rs.requests.Load(); n != 2 {
		t.Fatalf("%d fetches after the TTL, want 2", n)
	}
}

func TestSource_DefaultTTLIsAMinute(t *testing.T) {
	rs := newRateServer(t, "50000", nil)
	if s := newSource(t, rs, Options{}); s.opts.TTL != time.Minute {
		t.Fatalf("TTL %v", s.opts.TTL)
	}
}

func TestSource_ConcurrentCallersShareOneFetch(t *testing.T) {
	hold := make(chan struct{})
	rs := newRateServer(t, "50000", hold)
	// A clock past every expiry: only sharing the fetch under way, not
	// the cache, keeps the callers to one fetch.
	far := time.Now().Add(1000 * time.Hour)
	s := newSource(t, rs, Options{Now: func() time.Time { return far }})
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			if _, err := s.USDPerBTC(context.Background()); err != nil {
				errs <- err
			}
		})
	}
	testwait.Eventually(t, 10*time.Second, "every caller waits for the one fetch", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.flight != nil && s.flight.waiters.Load() == callers
	})
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := rs.requests.Load(); n != 1 {
		t.Fatalf("%d fetches for %d concurrent callers, want 1", n, callers)
	}
}

func TestSource_AWaiterThatGivesUpLeavesTheFetchToOthers(t *testing.T) {
	hold := make(chan struct{})
	rs := newRateServer(t, "50000", hold)
	s := newSource(t, rs, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := s.USDPerBTC(ctx); first <- err }()
	testwait.Eventually(t, 10*time.Second, "the fetch starts", func() bool { return rs.requests.Load() == 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v", err)
	}
	close(hold)
	wantRate(t, s, "50000")
	if n := rs.requests.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestSource_FailuresAreErrorsNotGuesses(t *testing.T) {
	big := strings.Repeat(" ", DefaultMaxBytes) + "50000"
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    error
	}{
		{"status 500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", 500) }, outbound.ErrStatus},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://10.0.0.1/", http.StatusFound)
		}, outbound.ErrRedirected},
		{"too large", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, big)
		}, outbound.ErrTooLarge},
		{"html", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>50000</p>")
		}, outbound.ErrContentType},
		{"no price", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"data":{"amount":null}}`)
		}, ErrBadAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			s, err := New(Options{URL: srv.URL, Pointer: "/data/amount", Fetcher: outboundtest.Allowing(srv)})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // a failure is not kept: each caller fetches again
				if r, err := s.USDPerBTC(context.Background()); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, %v; want %v", r, err, tc.want)
				}
			}
		})
	}
}

func TestNew_RefusesWhatCannotBeFetched(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want error
	}{
		{"no URL", Options{}, nil},
		{"private address", Options{URL: "http://127.0.0.1:9/"}, outbound.ErrNotPublic},
		{"scheme", Options{URL: "file:///etc/passwd"}, outbound.ErrScheme},
		{"credentials", Options{URL: "https://u:p@rates.example/"}, outbound.ErrCredentials},
		{"pointer", Options{URL: "https://rates.example/", Pointer: "data"}, ErrBadPointer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
