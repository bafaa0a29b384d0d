package catalogpage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeCaller records calls; a mock is fine here, the browser tests in
// cmd/cvm call real servers.
type fakeCaller struct {
	mu    sync.Mutex
	calls []CallRequest
	late  []Reporter // the reporters of calls that returned
}

// Call reports the steps a paid call goes through: sent, paying and paid
// (what the person agreed to), progress.
func (f *fakeCaller) Call(_ context.Context, req CallRequest, r Reporter) (*mcp.CallToolResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.late = append(f.late, r)
	f.mu.Unlock()
	r.Sent()
	if req.MaxPay > 0 {
		r.Paying(Payment{Amount: req.MaxPay, Unit: req.Unit})
		r.Paid(Payment{Amount: req.MaxPay, Unit: req.Unit})
	}
	r.Progress(Progress{Progress: 1, Total: 2})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}

func (f *fakeCaller) n() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.calls) }

func announce(t *testing.T, c *discovery.Catalog, sk nostr.SecretKey, picture string, tags nostr.Tags) {
	t.Helper()
	init := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`
	tools := `{"tools":[{"name":"add","inputSchema":{"type":"object"}},{"name":"free","inputSchema":{"type":"object"}}]}`
	for _, e := range []nostr.Event{
		{Kind: contextvm.KindServerAnnouncement, CreatedAt: nostr.Now(), Content: init, Tags: nostr.Tags{{"name", "S"}, {"picture", picture}}},
		{Kind: contextvm.KindToolsList, CreatedAt: nostr.Now(), Content: tools, Tags: tags},
	} {
		if err := e.Sign(sk); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Add(e); err != nil {
			t.Fatal(err)
		}
	}
}

// newTestPage serves a page whose catalog has one server, announcing
// picture; fetcher fetches it (nil: the default, public addresses only).
func newTestPage(t *testing.T, picture string, fetcher *outbound.Fetcher) (*Page, *fakeCaller, nostr.PubKey, *httptest.Server) {
	t.Helper()
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	announce(t, c, sk, picture, nostr.Tags{{"cap", "tool:add", "3", "sats"}})
	fc := &fakeCaller{}
	p, err := New(Options{Catalog: c, Caller: fc, Logger: slog.New(slog.DiscardHandler), MaxPictureBytes: 1000, Fetcher: fetcher,
		Budget: "at most 5 sats a call", MaxPerCall: 5, BudgetUnit: "sats"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { p.Close(); srv.Close() })
	return p, fc, sk.Public(), srv
}

func post(t *testing.T, srv *httptest.Server, token, body string, mod func(*http.Request)) (int, string) {
	t.Helper()
	return postTo(t, srv, "/api/call", token, body, mod)
}

// postTo posts body to path as the page does: same origin, JSON, token.
func postTo(t *testing.T, srv *httptest.Server, path, token, body string, mod func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(tokenHeader, token)
	if mod != nil {
		mod(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestCall_PricedNeedsItsOwnSingleUseQuote(t *testing.T) {
	p, fc, pk, srv := newTestPage(t, "", nil)
	tok := p.pageToken()
	call := `{"server":"` + pk.Hex() + `","tool":"add","arguments":{"a":1}}`

	status, body := post(t, srv, tok, call, nil)
	var q struct {
		Code, Message, Quote, Unit string
		Amount                     int64
	}
	json.Unmarshal([]byte(body), &q)
	if status != http.StatusPaymentRequired || q.Code != "confirm_payment" || !strings.Contains(q.Message, "confirm to pay") || q.Quote == "" || q.Amount != 3 || q.Unit != "sats" || fc.n() != 0 {
		t.Fatalf("unconfirmed priced call: %d %s, %d calls", status, body, fc.n())
	}
	// The quote is for these arguments only.
	if status, body := post(t, srv, tok, `{"server":"`+pk.Hex()+`","tool":"add","arguments":{"a":2},"quote":"`+q.Quote+`"}`, nil); status != http.StatusConflict || fc.n() != 0 {
		t.Fatalf("quote with other arguments: %d %s", status, body)
	}
	// That attempt spent it.
	if status, _ := post(t, srv, tok, strings.Replace(call, "}}", `},"quote":"`+q.Quote+`"}`, 1), nil); status != http.StatusConflict {
		t.Fatalf("a spent quote: %d", status)
	}
	_, body = post(t, srv, tok, call, nil)
	json.Unmarshal([]byte(body), &q)
	status, body = post(t, srv, tok, strings.Replace(call, "}}", `},"quote":"`+q.Quote+`"}`, 1), nil)
	if status != 200 || !strings.Contains(body, `"progress"`) || !strings.Contains(body, `"result"`) || fc.n() != 1 || fc.calls[0].MaxPay != 3 || fc.calls[0].Unit != "sats" {
		t.Fatalf("confirmed call: %d %s %+v", status, body, fc.calls)
	}
	if status, _ := post(t, srv, tok, strings.Replace(call, "}}", `},"quote":"`+q.Quote+`"}`, 1), nil); status != http.StatusConflict || fc.n() != 1 {
		t.Fatalf("a replayed quote: %d, %d calls", status, fc.n())
	}
	// A free tool is called at once, and may pay nothing.
	status, _ = post(t, srv, tok, `{"server":"`+pk.Hex()+`","tool":"free"}`, nil)
	if status != 200 || fc.n() != 2 || fc.calls[1].MaxPay != 0 {
		t.Fatalf("free call: %d %+v", status, fc.calls)
	}
}

// A confirmed call streams each step as it comes: calling, waiting,
// paying and paid (the amount, and the server's name and npub), progress,
// the result. What the caller reports after it returned is dropped.
func TestCall_StreamsItsStepsAndWhatWasPaid(t *testing.T) {
	p, fc, pk, srv := newTestPage(t, "", nil)
	tok := p.pageToken()
	call := `{"server":"` + pk.Hex() + `","tool":"add","arguments":{}}`
	_, body := post(t, srv, tok, call, nil)
	var q struct{ Quote string }
	json.Unmarshal([]byte(body), &q)
	status, body := post(t, srv, tok, strings.Replace(call, "}}", `},"quote":"`+q.Quote+`"}`, 1), nil)
	if status != 200 {
		t.Fatalf("confirmed call: %d %s", status, body)
	}
	s, _ := p.opts.Catalog.Server(pk)
	paid := `"payment":{"amount":3,"unit":"sats","to":{"name":"S","npub":"` + s.Npub + `"}}`
	want := []string{`{"step":"calling"}`, `{"step":"waiting"}`, `{` + paid + `,"step":"paying"}`, `{` + paid + `,"step":"paid"}`,
		`{"progress":{"progress":1,"total":2}}`, `{"result":{"content":[{"type":"text","text":"ok"}]}}`}
	if got := strings.Split(strings.TrimSpace(body), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the stream:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The response is over: a late report must not write to it.
	fc.late[0].Paid(Payment{Amount: 1, Unit: "sats"})
	fc.late[0].Progress(Progress{Progress: 2})
}

func TestCall_OverBudgetIsRefusedBeforeAnyQuote(t *testing.T) {
	for _, max := range []int64{0, 2} {
		c := discovery.NewCatalog()
		sk := nostr.Generate()
		announce(t, c, sk, "", nostr.Tags{{"cap", "tool:add", "3", "sats"}})
		fc := &fakeCaller{}
		p, err := New(Options{Catalog: c, Caller: fc, Logger: slog.New(slog.DiscardHandler), MaxPerCall: max, BudgetUnit: "sats", Budget: "at most 2 sats a call"})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		status, body := post(t, srv, p.pageToken(), `{"server":"`+sk.Public().Hex()+`","tool":"add"}`, nil)
		srv.Close()
		p.Close()
		if status != http.StatusConflict || !strings.Contains(body, CodeOverBudget) || strings.Contains(body, "quote") || fc.n() != 0 {
			t.Errorf("max %d: %d %s", max, status, body)
		}
	}
}

func TestCall_RefusesWhatAnotherSiteCanSend(t *testing.T) {
	p, fc, pk, srv := newTestPage(t, "", nil)
	tok := p.pageToken()
	call := `{"server":"` + pk.Hex() + `","tool":"free"}`
	for _, c := range []struct {
		name   string
		mod    func(*http.Request)
		token  string
		status int
		code   string
	}{
		{"foreign origin", func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, tok, 403, "cross_origin"},
		{"no origin", func(r *http.Request) { r.Header.Del("Origin") }, tok, 403, "cross_origin"},
		{"cross-site fetch", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, tok, 403, "cross_origin"},
		{"no token", nil, "", 403, "bad_page_token"},
		{"forged token", nil, strings.Repeat("0", 32) + "." + strings.Repeat("0", 64), 403, "bad_page_token"},
		{"form encoding", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, tok, 415, "bad_content_type"},
		{"rebound host", func(r *http.Request) { r.Host = "evil.example" }, tok, 421, "bad_host"},
	} {
		status, body := post(t, srv, c.token, call, c.mod)
		if status != c.status || !strings.Contains(body, c.code) {
			t.Errorf("%s: %d %s", c.name, status, body)
		}
	}
	for body, code := range map[string]string{
		`{"server":"zz","tool":"free"}`:                            "bad_request",
		`{"server":"` + strings.Repeat("ab", 32) + `","tool":"x"}`: "unknown_server",
		`{"server":"` + pk.Hex() + `","tool":"nope"}`:              "unknown_tool",
		`not json`: "bad_request",
	} {
		if _, got := post(t, srv, tok, body, nil); !strings.Contains(got, code) {
			t.Errorf("%s: %s, want %s", body, got, code)
		}
	}
	if fc.n() != 0 {
		t.Fatalf("%d calls made", fc.n())
	}
}

func TestPictures_OnlySmallRasterImagesFromCvmsOrigin(t *testing.T) {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 2, 2)))
	pngBytes := buf.Bytes()
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok.png":
			w.Write(pngBytes)
		case "/svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			io.WriteString(w, `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
		case "/html":
			w.Header().Set("Content-Type", "image/png")
			io.WriteString(w, "<html><script>alert(1)</script></html>")
		case "/big":
			w.Write(append(pngBytes, make([]byte, 2000)...))
		default:
			http.NotFound(w, r)
		}
	}))
	defer remote.Close()
	for path, want := range map[string]int{"/ok.png": 200, "/svg": 404, "/html": 404, "/big": 404, "/gone": 404} {
		_, _, pk, srv := newTestPage(t, remote.URL+path, outboundtest.Allowing(remote))
		resp, b := getPicture(t, srv, pk)
		if resp.StatusCode != want || (want == 200 && (resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal(b, pngBytes))) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	_, _, pk, srv := newTestPage(t, "javascript:alert(1)", nil)
	resp, _ := http.Get(srv.URL + "/api/servers")
	var list struct{ Servers []struct{ HasPicture bool } }
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Servers) != 1 || list.Servers[0].HasPicture {
		t.Errorf("a javascript: picture is offered: %+v", list)
	}
	resp, _ = http.Get(srv.URL + "/api/picture/" + pk.Hex())
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("javascript: picture: %d", resp.StatusCode)
	}
}

func getPicture(t *testing.T, srv *httptest.Server, pk nostr.PubKey) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/api/picture/" + pk.Hex())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func hasPicture(t *testing.T, srv *httptest.Server) bool {
	t.Helper()
	resp, err := http.Get(srv.URL + "/api/servers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Servers []struct{ HasPicture bool } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Servers) != 1 {
		t.Fatalf("server list: %v, %+v", err, list)
	}
	return list.Servers[0].HasPicture
}

// pngServer serves a valid PNG at every path and counts the requests.
func pngServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var buf bytes.Buffer
	png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 2, 2)))
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write(buf.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestPictures_LoopbackPictureIsNeitherFetchedNorServed: an announced
// picture on the operator's own machine (by address or by a name that
// resolves there) is not offered, not fetched, and answered no_picture.
func TestPictures_LoopbackPictureIsNeitherFetchedNorServed(t *testing.T) {
	local, hits := pngServer(t)
	_, port, _ := net.SplitHostPort(local.Listener.Addr().String())
	for _, c := range []struct {
		url     string
		offered bool
	}{
		{local.URL + "/logo.png", false},                 // a literal loopback address: known at once
		{"http://localhost:" + port + "/logo.png", true}, // a name: judged when dialled
	} {
		_, _, pk, srv := newTestPage(t, c.url, nil)
		if got := hasPicture(t, srv); got != c.offered {
			t.Errorf("%s: hasPicture %v", c.url, got)
		}
		if resp, b := getPicture(t, srv, pk); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), CodeNoPicture) {
			t.Errorf("%s: %d %s", c.url, resp.StatusCode, b)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the loopback server", hits.Load())
	}
}

// TestPictures_RedirectToLoopbackIsRefused: the picture's host (allowed as
// if public) redirects to another loopback port, not allowed: nothing is
// fetched there, and nothing served.
func TestPictures_RedirectToLoopbackIsRefused(t *testing.T) {
	local, hits := pngServer(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, local.URL+"/logo.png", http.StatusFound)
	}))
	defer origin.Close()
	_, _, pk, srv := newTestPage(t, origin.URL+"/logo.png", outboundtest.Allowing(origin))
	if resp, b := getPicture(t, srv, pk); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), CodeNoPicture) {
		t.Errorf("redirect to loopback: %d %s", resp.StatusCode, b)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests followed the redirect to loopback", hits.Load())
	}
	// The same picture, allowed, is served: the refusal above is the
	// address's, not the picture's.
	_, _, pk, srv = newTestPage(t, origin.URL+"/logo.png", outboundtest.Allowing(origin, local))
	if resp, _ := getPicture(t, srv, pk); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("redirect to an allowed address: %d", resp.StatusCode)
	}
}

func TestEvents_NotifyReachesOpenPages(t *testing.T) {
	p, _, _, srv := newTestPage(t, "", nil)
	resp, err := http.Get(srv.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if <-lines != "retry: 2000" {
		t.Fatal("no retry line first")
	}
	p.Notify()
	deadline := time.After(testwait.Timeout(10 * time.Second))
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			if l == "event: changed" {
				return
			}
		case <-deadline:
			t.Fatal("no changed event")
		}
	}
}

func TestServers_FiltersAndPageToken(t *testing.T) {
	p, _, _, srv := newTestPage(t, "", nil)
	for q, n := range map[string]int{"": 1, "?tool=add": 1, "?tool=nope": 0, "?text=s": 1, "?text=zzz": 0, "?tool=add&max_price=2": 0, "?tool=add&max_price=3": 1, "?encrypted=1": 0} {
		resp, _ := http.Get(srv.URL + "/api/servers" + q)
		var list struct{ Servers []json.RawMessage }
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Servers) != n {
			t.Errorf("%s: %d servers, want %d", q, len(list.Servers), n)
		}
	}
	// A filter naming tools marks them; others, and every tool without
	// one, are unmarked.
	for q, want := range map[string]string{"?tool=add": "add", "?tool=add&max_price=3": "add", "?max_price=0": "free", "": "", "?text=s": ""} {
		resp, _ := http.Get(srv.URL + "/api/servers" + q)
		var list struct {
			Servers []struct {
				Tools []struct {
					Name  string
					Match bool
				}
			}
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		var marked []string
		for _, t := range list.Servers[0].Tools {
			if t.Match {
				marked = append(marked, t.Name)
			}
		}
		if strings.Join(marked, ",") != want {
			t.Errorf("%s: marked %q, want %q", q, marked, want)
		}
	}
	resp, _ := http.Get(srv.URL + "/api/servers?max_price=-1")
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("negative max_price: %d", resp.StatusCode)
	}
	resp, _ = http.Get(srv.URL + "/")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	i := strings.Index(string(b), `name="cvm-page-token" content="`)
	if i < 0 || strings.Contains(string(b), tokenMetaValue) || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("page without its token or CSP")
	}
	tok := string(b[i+len(`name="cvm-page-token" content="`):])
	tok = tok[:strings.IndexByte(tok, '"')]
	if !p.tokenValid(tok) || p.tokenValid(tok[:len(tok)-1]+"0") && !strings.HasSuffix(tok, "0") {
		t.Errorf("served token %q", tok)
	}
}

func FuzzTokenValid(f *testing.F) {
	p, err := New(Options{Catalog: discovery.NewCatalog()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p.pageToken())
	f.Add("")
	f.Add(".")
	f.Fuzz(func(t *testing.T, tok string) {
		if p.tokenValid(tok) && tok != strings.ToLower(tok) {
			t.Fatalf("accepted %q", tok)
		}
	})
}

// The schema filter takes what the page shows of a hash, as cvm discover
// --schema does: its start, with its "…", when one hash starts with it; a
// start that two share is a bad filter naming both.
func TestServers_SchemaFilterTakesTheStartOfAHash(t *testing.T) {
	object := json.RawMessage(`{"type":"object"}`)
	hash := func(name string) string {
		h, err := commonschema.Hash(commonschema.Tool{Name: name, InputSchema: object})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	c := discovery.NewCatalog()
	addHash, freeHash := hash("add"), hash("free")
	announce(t, c, nostr.Generate(), "", nostr.Tags{{"i", addHash, "add"}, {"i", freeHash, "free"}})
	// A second server's tool whose hash starts as add's does.
	other := ""
	for i := 0; other == "" || hash(other)[0] != addHash[0]; i++ {
		other = fmt.Sprintf("tool%d", i)
	}
	sk := nostr.Generate()
	for _, e := range []nostr.Event{
		{Kind: contextvm.KindServerAnnouncement, CreatedAt: nostr.Now(), Content: `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"o","version":"1"}}`, Tags: nostr.Tags{}},
		{Kind: contextvm.KindToolsList, CreatedAt: nostr.Now(), Content: `{"tools":[{"name":"` + other + `","inputSchema":{"type":"object"}}]}`, Tags: nostr.Tags{{"i", hash(other), other}}},
	} {
		e.Sign(sk)
		if _, err := c.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Options{Catalog: c, Caller: &fakeCaller{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { p.Close(); srv.Close() })
	get := func(schema string) (int, []json.RawMessage, string) {
		resp, err := http.Get(srv.URL + "/api/servers?schema=" + url.QueryEscape(schema))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Servers []json.RawMessage
			Message string
		}
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Servers, body.Message
	}
	for _, schema := range []string{freeHash, freeHash[:16], freeHash[:16] + "…", strings.ToUpper(freeHash[:5])} {
		if code, servers, msg := get(schema); code != 200 || len(servers) != 1 {
			t.Errorf("schema=%s: %d, %d servers, %s", schema, code, len(servers), msg)
		}
	}
	code, _, msg := get(addHash[:1])
	if code != http.StatusBadRequest || !strings.Contains(msg, addHash) || !strings.Contains(msg, hash(other)) || !strings.Contains(msg, "type more of the hash") {
		t.Errorf("a shared start: %d %q", code, msg)
	}
	none := "0"
	if addHash[0] == '0' || freeHash[0] == '0' {
		none = "f"
	}
	if code, servers, msg := get(none + "123"); code != 200 || len(servers) != 0 {
		t.Errorf("a start no hash has: %d, %d servers, %s", code, len(servers), msg)
	}
}

// With Options.Reputation the list comes ranked, each server with its
// score and why, unless sort=name; without it, no scores.
func TestServers_RankedByReputation(t *testing.T) {
	c := discovery.NewCatalog()
	// By key (the name order: every server is "S"), 0, 1, 2; by score, 2,
	// 0, 1.
	keys := []nostr.SecretKey{nostr.Generate(), nostr.Generate(), nostr.Generate()}
	slices.SortFunc(keys, func(a, b nostr.SecretKey) int { return strings.Compare(a.Public().Hex(), b.Public().Hex()) })
	for _, sk := range keys {
		announce(t, c, sk, "", nil)
	}
	score := map[nostr.PubKey]float64{keys[0].Public(): 65, keys[1].Public(): 40, keys[2].Public(): 90}
	rank := func(servers []discovery.Server) reputation.Scores {
		out := reputation.Scores{}
		for _, s := range servers {
			out[s.Pubkey] = reputation.Score{Value: score[s.Pubkey], Why: fmt.Sprintf("because %.0f", score[s.Pubkey])}
		}
		return out
	}
	list := func(opts Options, query string) (ranked bool, pubkeys, whys []string) {
		t.Helper()
		p, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		defer func() { p.Close(); srv.Close() }()
		resp, err := http.Get(srv.URL + "/api/servers" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Reputation bool
			Servers    []struct {
				Pubkey     string
				Reputation *reputation.Score
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		for _, s := range body.Servers {
			pubkeys = append(pubkeys, s.Pubkey)
			if s.Reputation != nil {
				whys = append(whys, s.Reputation.Why)
			}
		}
		return body.Reputation, pubkeys, whys
	}
	hexes := func(order ...int) []string {
		var out []string
		for _, i := range order {
			out = append(out, keys[i].Public().Hex())
		}
		return out
	}

	opts := Options{Catalog: c, Logger: slog.New(slog.DiscardHandler), Reputation: rank}
	if ranked, got, whys := list(opts, ""); !ranked || !slices.Equal(got, hexes(2, 0, 1)) || !slices.Equal(whys, []string{"because 90", "because 65", "because 40"}) {
		t.Errorf("ranked: %v %v %q", ranked, got, whys)
	}
	if _, got, whys := list(opts, "?sort=name"); !slices.Equal(got, hexes(0, 1, 2)) || len(whys) != 3 {
		t.Errorf("sort=name: %v %q", got, whys)
	}
	opts.Reputation = nil
	if ranked, got, whys := list(opts, ""); ranked || !slices.Equal(got, hexes(0, 1, 2)) || whys != nil {
		t.Errorf("without reputation: %v %v %q", ranked, got, whys)
	}
}
