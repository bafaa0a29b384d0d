package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpUpstream serves testServer over streamable HTTP and records the
// protocol version header of every POST after the first.
type httpUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	versions []string
}

func newHTTPUpstream(t *testing.T) *httpUpstream {
	srv := testServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	u := &httpUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
			u.mu.Lock()
			u.versions = append(u.versions, r.Header.Get("Mcp-Protocol-Version"))
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func TestHTTPUpstream_PerClient(t *testing.T) {
	up := newHTTPUpstream(t)
	b := newBench(t, gateway.Options{Upstream: &gateway.HTTP{URL: up.URL}})
	changed := make(chan struct{}, 4)
	var mu sync.Mutex
	var progress []float64
	a := b.connect(&mcp.ClientOptions{
		CreateMessageHandler:   sampler,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	})
	c := b.connect(nil)
	if res := a.InitializeResult(); res.ServerInfo.Name != "gateway-test-upstream" || res.Instructions != testInstructions {
		t.Errorf("initialize result %+v", res)
	}
	if sa, sc := call(t, a, "session", nil), call(t, c, "session", nil); sa == "" || sa == sc {
		t.Fatalf("HTTP sessions %q and %q: want one per client", sa, sc)
	}
	if got := call(t, a, "echo", map[string]any{"text": "over http"}); got != "over http" {
		t.Errorf("echo %q", got)
	}
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 30, "steps": 3}}
	params.SetProgressToken(7)
	if _, err := a.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, patience, "progress over HTTP", func() bool { mu.Lock(); defer mu.Unlock(); return len(progress) == 3 })
	if got := call(t, a, "sample", map[string]any{"text": "q"}); got != "sampled: q" {
		t.Errorf("sampling over HTTP: %q", got)
	}
	// Sent outside any request: only the GET stream carries it.
	call(t, a, "add_tool", nil)
	within(t, changed, "tools/list_changed on the GET stream")

	up.mu.Lock()
	defer up.mu.Unlock()
	for _, v := range up.versions {
		if v != "2025-11-25" {
			t.Fatalf("a request after initialize carried Mcp-Protocol-Version %q", v)
		}
	}
}

func TestHTTPUpstream_Shared(t *testing.T) {
	up := newHTTPUpstream(t)
	b := newBench(t, gateway.Options{Mode: gateway.Shared, Upstream: &gateway.HTTP{URL: up.URL}})
	a, c := b.connect(nil), b.connect(nil)
	if sa, sc := call(t, a, "session", nil), call(t, c, "session", nil); sa == "" || sa != sc {
		t.Fatalf("HTTP sessions %q and %q: want one for all", sa, sc)
	}
}

func TestHTTPUpstream_Unreachable(t *testing.T) {
	up := newHTTPUpstream(t)
	url := up.URL
	up.Close()
	_, err := gateway.Check(context.Background(), &gateway.HTTP{URL: url}, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Check: %v", err)
	}
}
