package catalogpage

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/webui"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//go:embed assets
var assets embed.FS

// Codes of the JSON errors of the catalog's API (listed in
// docs/error-codes.md), besides webui's.
const (
	CodeBadRequest     = "bad_request"      // 400: a malformed call, public key or JSON body
	CodeBadFilter      = "bad_filter"       // 400: a filter of /api/servers does not parse
	CodeCrossOrigin    = "cross_origin"     // 403: a call not from this catalog's own page (Origin, Referer, Sec-Fetch-Site)
	CodeBadPageToken   = "bad_page_token"   // 403: a call without the page's token, or with a forged one
	CodeBadContentType = "bad_content_type" // 415: a call not sent as application/json (a form's encodings)
	CodeTryItDisabled  = "try_it_disabled"  // 404: this catalog makes no calls
	CodeUnknownServer  = "unknown_server"   // 404: the server is not in the catalog
	CodeUnknownTool    = "unknown_tool"     // 404: the server announces no such tool
	CodeNoPicture      = "no_picture"       // 404: no picture cvm fetched and would show
	CodeConfirmPayment = "confirm_payment"  // 402: a priced tool; the body has the price and a quote to confirm
	CodeBadQuote       = "bad_quote"        // 409: the quote is unknown, used, expired or for another call or price
	CodeOverBudget     = "over_budget"      // 409: the price is more than the operator's budget allows per call
	CodeUnpayablePrice = "unpayable_price"  // 409: the announced price cannot be paid (unknown or unbounded)
)

// CallRequest is one "try it" call.
type CallRequest struct {
	Server    nostr.PubKey
	Tool      string
	Arguments map[string]any
	// MaxPay is what the person agreed to pay (in Unit), 0 for a free
	// tool: a payment request over it, in another unit, or for a free tool
	// is declined.
	MaxPay int64
	Unit   string
}

// Progress is a progress notification of a running call.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// Payment is what the called server asks for, or was paid, for a call.
type Payment struct {
	Amount int64
	Unit   string
}

// Reporter is told how a running call goes, as it goes, so that the
// person sees what the call waits for. Its methods may be called from any
// goroutine; what is reported after Call returned is dropped.
type Reporter interface {
	// Sent: the server was found and the request is on its way; the
	// result is awaited.
	Sent()
	// Paying: the called server asked for p, and p is being paid.
	Paying(p Payment)
	// Paid: p was paid to the called server; the result is awaited.
	Paid(p Payment)
	// Progress: a progress notification of the tool.
	Progress(p Progress)
}

// Caller makes "try it" calls with the operator's client identity (and
// wallet, within its budget), telling r how each goes. It pays no one but
// req.Server.
type Caller interface {
	Call(ctx context.Context, req CallRequest, r Reporter) (*mcp.CallToolResult, error)
}

// Options configure a Page.
type Options struct {
	Catalog *discovery.Catalog // required
	// Caller makes "try it" calls; nil leaves the page without them.
	Caller Caller
	// Social shows servers' profiles, notes and reviews and posts the
	// operator's reviews (social.go); nil leaves the page without them.
	Social Social
	// AllowedHosts are Host names besides loopback ones the page answers
	// to (patterns as in path.Match).
	AllowedHosts []string
	// Fetcher fetches servers' pictures (default outbound.New with its
	// defaults: public addresses only, redirects bounded, 10 s). A picture
	// URL is a stranger's: without it, anyone announcing a server could
	// make cvm fetch, and serve back, what only the operator's network
	// can reach. MaxPictureBytes bounds each picture (default 512 KiB).
	Fetcher         *outbound.Fetcher
	MaxPictureBytes int64
	// Budget describes, for the person, what the operator's budget allows
	// (e.g. "at most 50 sats a call"); "" when no payments are possible.
	Budget string
	// MaxPerCall and BudgetUnit are the budget's cap on one call: a priced
	// tool over it, or in another unit, is refused before any quote (the
	// client's budget would refuse to pay it anyway). MaxPerCall 0: no
	// payments at all.
	MaxPerCall int64
	BudgetUnit string
	// Rates, when set, shows a usd price with what it comes to in sats,
	// and lets "try it" pay it: up to the price at this rate raised by
	// Tolerance (a fraction; payments.DefaultTolerance when zero, none
	// when negative), in sats. Without it a usd-priced tool is shown in
	// usd only and not called.
	Rates     payments.Rates
	Tolerance float64
	// Reputation, if set, scores the servers listed (package reputation):
	// the page shows each score and why, and sorts by it unless the
	// person sorts by name (sort=name in the URL). Nil: no scores, sorted
	// by name.
	Reputation func([]discovery.Server) reputation.Scores
	Logger     *slog.Logger
}

// Page is the catalog page's HTTP handler. Call Notify when the catalog
// changes and Close when done.
type Page struct {
	opts   Options
	log    *slog.Logger
	pages  http.Handler
	index  []byte
	secret [32]byte
	mux    *http.ServeMux

	mu       sync.Mutex
	version  uint64
	changed  chan struct{} // closed and replaced by Notify
	closed   chan struct{}
	quotes   map[string]quote
	pictures map[string]picture
}

// quote is a priced call the page was told the price of: confirming it
// calls exactly that, once, within quoteTTL.
type quote struct {
	key     string // server, tool and arguments
	amount  int64
	unit    string
	expires time.Time
}

const (
	quoteTTL       = 5 * time.Minute
	maxQuotes      = 1000
	maxCallBody    = 1 << 20
	tokenHeader    = "X-CVM-Page-Token"
	tokenMetaValue = "{{PAGE_TOKEN}}"
)

// New returns the page for opts.
func New(opts Options) (*Page, error) {
	if opts.Catalog == nil {
		return nil, errors.New("catalogpage: Options.Catalog is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Fetcher == nil {
		opts.Fetcher = outbound.New(outbound.Options{})
	}
	if opts.MaxPictureBytes <= 0 {
		opts.MaxPictureBytes = 512 << 10
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		return nil, err
	}
	p := &Page{opts: opts, log: opts.Logger, pages: webui.NewPages(sub), index: index,
		changed: make(chan struct{}), closed: make(chan struct{}), quotes: map[string]quote{}, pictures: map[string]picture{}}
	rand.Read(p.secret[:])
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", p.serveIndex)
	m.Handle("GET /ui/", p.pages)
	m.HandleFunc("GET /api/servers", p.serveServers)
	m.HandleFunc("GET /api/events", p.serveEvents)
	m.HandleFunc("GET /api/picture/{pubkey}", p.servePicture)
	m.HandleFunc("POST /api/call", p.serveCall)
	m.HandleFunc("GET /api/about/{pubkey}", p.serveAbout)
	m.HandleFunc("POST /api/review", p.serveReview)
	m.HandleFunc("GET /schema/{hash}", p.serveSchemaPage)
	m.HandleFunc("GET /category/{name}", p.serveCategoryPage)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		webui.WriteError(w, http.StatusNotFound, webui.CodeNotFound, "no endpoint "+r.Method+" "+r.URL.Path+"; the page is at /")
	})
	p.mux = m
	return p, nil
}

// ServeHTTP implements http.Handler.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	webui.SetHeaders(w.Header())
	if !webui.HostAllowed(r.Host, p.opts.AllowedHosts) {
		webui.WriteError(w, http.StatusMisdirectedRequest, webui.CodeBadHost,
			"Host "+r.Host+" is not this server; open the page at its loopback address")
		return
	}
	p.mux.ServeHTTP(w, r)
}

// Notify tells open pages that the catalog changed.
func (p *Page) Notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.version++
	close(p.changed)
	p.changed = make(chan struct{})
}

// Close ends the pages' event streams.
func (p *Page) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
}

// pageToken is a fresh token for one page load: a nonce and its MAC, so
// that any page this server served can call, and nothing else can.
func (p *Page) pageToken() string {
	var nonce [16]byte
	rand.Read(nonce[:])
	mac := hmac.New(sha256.New, p.secret[:])
	mac.Write(nonce[:])
	return hex.EncodeToString(nonce[:]) + "." + hex.EncodeToString(mac.Sum(nil))
}

func (p *Page) tokenValid(tok string) bool {
	n, m, ok := strings.Cut(tok, ".")
	nonce, err1 := hex.DecodeString(n)
	sum, err2 := hex.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || len(nonce) != 16 {
		return false
	}
	mac := hmac.New(sha256.New, p.secret[:])
	mac.Write(nonce)
	return hmac.Equal(sum, mac.Sum(nil))
}

func (p *Page) serveIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page := strings.Replace(string(p.index), tokenMetaValue, p.pageToken(), 1)
	io.WriteString(w, page)
}

// serverView is a server as the page shows it.
type serverView struct {
	discovery.Server
	HasPicture bool     `json:"hasPicture"`
	Tools      []toolVw `json:"tools"`
	// Reputation is the server's score and why, with Options.Reputation.
	Reputation *reputation.Score `json:"reputation,omitempty"`
}

type toolVw struct {
	discovery.Tool
	// PriceHigh is the most a call can cost (a range at its top), null
	// for an unknown price; absent for a free tool.
	PriceHigh *float64 `json:"priceHigh,omitempty"`
	// Match: the filter names tools (by name, schema or price) and this
	// is one of them, which the page shows first and marked.
	Match bool `json:"match,omitempty"`
}

// filterFrom reads the page's filters from the query: the same as cvm
// discover's flags, plus text, matched in names, about and tools.
func filterFrom(q url.Values) (discovery.Filter, string, error) {
	f := discovery.Filter{Tool: q.Get("tool"), SchemaHash: strings.ToLower(q.Get("schema")), Category: q.Get("category"),
		Encrypted: q.Get("encrypted") == "1"}
	if v := q.Get("max_price"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || n != n {
			return f, "", fmt.Errorf("max_price %q: want a price of 0 or more", v)
		}
		f.MaxPrice = &n
	}
	return f, strings.ToLower(strings.TrimSpace(q.Get("text"))), nil
}

// schemaFilter reads the schema filter as cvm discover --schema reads it:
// a whole hash, or the start of one (as the page shows it, "…" and all)
// when only one hash in the catalog starts with it. A start that several
// share is refused naming them; one that none has matches nothing.
func (p *Page) schemaFilter(v string) (string, error) {
	v = strings.TrimSuffix(strings.TrimSpace(v), "…")
	if v == "" || len(v) == sha256.Size*2 {
		return v, nil
	}
	hash, err := p.opts.Catalog.ResolveSchema(v)
	if amb := (*discovery.AmbiguousSchemaError)(nil); errors.As(err, &amb) {
		return "", fmt.Errorf("schema: %w; type more of the hash", err)
	}
	if err != nil {
		return v, nil
	}
	return hash, nil
}

func matchText(s discovery.Server, text string) bool {
	if text == "" {
		return true
	}
	fields := []string{s.Name, s.About, s.Npub, s.Website, strings.Join(s.Categories, " ")}
	for _, t := range s.Tools {
		fields = append(fields, t.Name, t.Description)
	}
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), text) {
			return true
		}
	}
	return false
}

func (p *Page) serveServers(w http.ResponseWriter, r *http.Request) {
	f, text, err := filterFrom(r.URL.Query())
	if err == nil {
		f.SchemaHash, err = p.schemaFilter(f.SchemaHash)
	}
	if err != nil {
		webui.WriteError(w, http.StatusBadRequest, CodeBadFilter, err.Error())
		return
	}
	p.mu.Lock()
	version := p.version
	p.mu.Unlock()
	toolFilter := f.Tool != "" || f.SchemaHash != "" || f.MaxPrice != nil
	usd := usdRate{rates: p.opts.Rates, log: p.log}
	servers := slices.DeleteFunc(p.opts.Catalog.Servers(f), func(s discovery.Server) bool { return !matchText(s, text) })
	var scores reputation.Scores
	if p.opts.Reputation != nil {
		scores = p.opts.Reputation(servers)
		if r.URL.Query().Get("sort") != "name" {
			reputation.Sort(servers, scores)
		}
	}
	out := []serverView{}
	for _, s := range servers {
		v := serverView{Server: s, HasPicture: p.pictureAllowed(s.Picture)}
		if sc, ok := scores[s.Pubkey]; ok {
			v.Reputation = &sc
		}
		for _, t := range s.Tools {
			tv := toolVw{Tool: t, Match: toolFilter && f.MatchTool(t)}
			if rate := usd.rate(r.Context(), t.Price); rate != nil {
				tv.Price = t.Price.InSats(rate) // a copy: the catalog's is shared
			}
			if t.Price != nil {
				if h := t.Price.High(); h < 1e300 {
					tv.PriceHigh = &h
				}
			}
			v.Tools = append(v.Tools, tv)
		}
		out = append(out, v)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"version": version, "servers": out, "tryIt": p.opts.Caller != nil, "budget": p.opts.Budget, "reputation": scores != nil})
}

// serveEvents is a Server-Sent Events stream: "changed" whenever the
// catalog changes, so the page reloads its list.
func (p *Page) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		webui.WriteError(w, http.StatusInternalServerError, webui.CodeInternal, "streaming is not supported here")
		return
	}
	// The channel is taken before the stream opens: a change made once the
	// page sees the stream open is never missed.
	p.mu.Lock()
	ch := p.changed
	p.mu.Unlock()
	var v uint64
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "retry: 2000\n\n")
	fl.Flush()
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-p.closed:
			return
		case <-keepalive.C:
			io.WriteString(w, ": keepalive\n\n")
		case <-ch:
			p.mu.Lock()
			ch, v = p.changed, p.version
			p.mu.Unlock()
			fmt.Fprintf(w, "event: changed\ndata: %d\n\n", v)
		}
		fl.Flush()
	}
}

// callBody is the JSON body of POST /api/call.
type callBody struct {
	Server    string         `json:"server"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	Quote     string         `json:"quote,omitempty"`
}

// serveCall is "try it". The answer is a stream of JSON lines (see
// callStream): the steps of the call, with what is paid and to whom, its
// progress, then {"result": CallToolResult} or {"error": message}. A
// priced tool without a quote is answered 402 with the price and a quote
// to confirm.
func (p *Page) serveCall(w http.ResponseWriter, r *http.Request) {
	if p.opts.Caller == nil {
		webui.WriteError(w, http.StatusNotFound, CodeTryItDisabled, "this catalog does not call tools")
		return
	}
	if !p.guardPost(w, r) {
		return
	}
	var body callBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCallBody))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		webui.WriteError(w, http.StatusBadRequest, CodeBadRequest, "the call is not valid JSON: "+err.Error())
		return
	}
	pk, ok := p.catalogServer(w, body.Server)
	if !ok {
		return
	}
	s, _ := p.opts.Catalog.Server(pk)
	i := slices.IndexFunc(s.Tools, func(t discovery.Tool) bool { return t.Name == body.Tool })
	if i < 0 {
		webui.WriteError(w, http.StatusNotFound, CodeUnknownTool, "the server announces no tool "+strconv.Quote(body.Tool))
		return
	}
	if body.Arguments == nil {
		body.Arguments = map[string]any{}
	}
	tool := s.Tools[i]
	req := CallRequest{Server: pk, Tool: tool.Name, Arguments: body.Arguments}
	if tool.Price != nil {
		amount, unit, err := p.priceToPay(r.Context(), tool.Price)
		if err != nil {
			webui.WriteError(w, http.StatusConflict, CodeUnpayablePrice, err.Error())
			return
		}
		if amount > p.opts.MaxPerCall || unit != p.opts.BudgetUnit {
			msg := fmt.Sprintf("%s costs up to %d %s a call, and this catalog pays nothing", tool.Name, amount, unit)
			if p.opts.MaxPerCall > 0 {
				msg = fmt.Sprintf("%s costs up to %d %s a call, more than the operator's budget allows (%s)", tool.Name, amount, unit, p.opts.Budget)
			}
			webui.WriteError(w, http.StatusConflict, CodeOverBudget, msg)
			return
		}
		key := quoteKey(pk, tool.Name, body.Arguments)
		if body.Quote == "" {
			id := p.newQuote(key, amount, unit)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusPaymentRequired)
			json.NewEncoder(w).Encode(map[string]any{"code": CodeConfirmPayment, "quote": id, "amount": amount, "unit": unit,
				"price": tool.Price, "budget": p.opts.Budget,
				"message": fmt.Sprintf("%s costs up to %d %s a call: confirm to pay", tool.Name, amount, unit)})
			return
		}
		if !p.takeQuote(body.Quote, key, amount, unit) {
			webui.WriteError(w, http.StatusConflict, CodeBadQuote, "the confirmation is unknown, used, expired, or for another call or price; confirm again")
			return
		}
		req.MaxPay, req.Unit = amount, unit
	}
	p.stream(w, r, req, s)
}

// guardPost answers, and refuses, a request that spends the operator's
// identity or wallet unless it comes from this catalog's own page: same
// origin, the page's token, a JSON body (which a form on another site
// cannot send).
func (p *Page) guardPost(w http.ResponseWriter, r *http.Request) bool {
	if !webui.SameOrigin(r) {
		webui.WriteError(w, http.StatusForbidden, CodeCrossOrigin, "calls are accepted from this catalog's own page only")
		return false
	}
	if !p.tokenValid(r.Header.Get(tokenHeader)) {
		webui.WriteError(w, http.StatusForbidden, CodeBadPageToken, "the page token is missing or wrong; reload the page")
		return false
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		webui.WriteError(w, http.StatusUnsupportedMediaType, CodeBadContentType, "send the call as application/json")
		return false
	}
	return true
}

// priceToPay is the most a call at price can cost, in whole units: for a
// usd price, in sats at the page's rate and tolerance.
func (p *Page) priceToPay(ctx context.Context, pr *discovery.Price) (int64, string, error) {
	h := pr.High()
	if h > 1e15 || h != h {
		return 0, "", fmt.Errorf("the announced price %q cannot be paid from here", pr.Unknown)
	}
	if pr.Unit == payments.UnitUSD {
		if p.opts.Rates == nil {
			return 0, "", fmt.Errorf("the price is %s usd, paid in sats at a usd rate this catalog does not have (--usd-rate-url)", pr.Amount)
		}
		rate, err := p.opts.Rates.USDPerBTC(ctx)
		if err != nil {
			p.log.Warn("no usd rate to pay a usd price", "err", err)
			return 0, "", fmt.Errorf("the price is %s usd, and this catalog's usd rate source failed; try again later", pr.Amount)
		}
		most, err := payments.MostToPay(payments.Exact(h), rate, payments.Tolerance(p.opts.Tolerance))
		return most, "sats", err
	}
	n := int64(h)
	if float64(n) < h {
		n++
	}
	return n, pr.Unit, nil
}

func quoteKey(pk nostr.PubKey, tool string, args map[string]any) string {
	b, _ := json.Marshal(args) // map keys are sorted: the same arguments, the same bytes
	sum := sha256.Sum256(append([]byte(pk.Hex()+"\x00"+tool+"\x00"), b...))
	return hex.EncodeToString(sum[:])
}

func (p *Page) newQuote(key string, amount int64, unit string) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, q := range p.quotes {
		if now.After(q.expires) || len(p.quotes) >= maxQuotes {
			delete(p.quotes, k)
		}
	}
	p.quotes[id] = quote{key: key, amount: amount, unit: unit, expires: now.Add(quoteTTL)}
	return id
}

// takeQuote spends quote id if it is for exactly this call and price.
func (p *Page) takeQuote(id, key string, amount int64, unit string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.quotes[id]
	delete(p.quotes, id)
	return ok && q.key == key && q.amount == amount && q.unit == unit && time.Now().Before(q.expires)
}
