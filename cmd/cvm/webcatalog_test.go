package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/chromedp/chromedp"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/browsertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverCount is a condition: the page lists n servers.
func serverCount(n int) string {
	return fmt.Sprintf(`document.querySelectorAll("#servers > li.server").length === %d`, n)
}

// publishHostile announces a server whose every string is markup, with a
// picture that is no image.
func publishHostile(t *testing.T, relayURL, pictureURL string) nostr.PubKey {
	t.Helper()
	sk := nostr.Generate()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	init := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`
	tools := `{"tools":[{"name":"evil<img src=x onerror=window.pwned5=1>","description":` + mustString(hostile) + `,"inputSchema":{"type":"object","properties":{"<b>x</b>":{"type":"string","description":` + mustString(hostile) + `}}}}]}`
	for _, e := range []nostr.Event{
		{Kind: contextvm.KindServerAnnouncement, CreatedAt: nostr.Now(), Content: init, Tags: nostr.Tags{
			{contextvm.TagName, "Hostile " + hostile}, {contextvm.TagAbout, strings.Repeat("long about ", 500) + hostile}, {contextvm.TagPicture, pictureURL}}},
		{Kind: contextvm.KindToolsList, CreatedAt: nostr.Now(), Content: tools, Tags: nostr.Tags{}},
	} {
		if err := e.Sign(sk); err != nil {
			t.Fatal(err)
		}
		if err := pool.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	return sk.Public()
}

// The input of the shapes server's one tool: a nested object and an array
// of objects, which the page's form can only take as JSON.
type (
	shapeOptions struct {
		Depth int      `json:"depth"`
		Tags  []string `json:"tags"`
	}
	shapePoint struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
	}
	shapeIn struct {
		Label   string       `json:"label"`
		Options shapeOptions `json:"options" jsonschema:"nested settings"`
		Points  []shapePoint `json:"points,omitempty" jsonschema:"a list of points"`
	}
)

// shapesOnNostr announces and serves, in process, a server whose tool "configure" echoes its input as JSON and hands it to the
// test on the returned channel.
func shapesOnNostr(t *testing.T, relayURL string) (pubkey string, calls <-chan shapeIn) {
	t.Helper()
	got := make(chan shapeIn, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "shapes", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "configure", Description: "Echo a nested configuration."},
		func(_ context.Context, _ *mcp.CallToolRequest, in shapeIn) (*mcp.CallToolResult, any, error) {
			got <- in
			b, err := json.Marshal(in)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(nostr.Generate()),
		Relays: []string{relayURL}, Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), s)
	t.Cleanup(func() { srv.Close() })
	return srv.PublicKey().Hex(), got
}

func mustString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The catalog page against a live relay: a server announced during the test
// appears and goes after cvm unannounce; filters narrow the list and survive
// a reload from the URL; "try it" calls server-everything behind cvm gateway
// and shows the result; a priced tool is paid only after the confirmation;
// hostile announcements run nothing; another site's form cannot call; the
// page is accessible at 375 px.
func TestCatalogPage_ListFilterTryPayAndRefuse(t *testing.T) {
	node, everything := serverEverything(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.json")
	ledger := payments.OpenLedger(ledgerPath)
	if err := ledger.Fund(context.Background(), "operator", 100); err != nil {
		t.Fatal(err)
	}
	srvWallet := writeSecret(t, dir, "srv.wallet", "fake://srv?ledger="+ledgerPath)
	opWallet := writeSecret(t, dir, "op.wallet", "fake://operator?ledger="+ledgerPath)

	// A priced demo server, announced before the page starts.
	demoKey := filepath.Join(dir, "demo.key")
	if code, _, errOut := c.run("keygen", "--out", demoKey); code != 0 {
		t.Fatal(errOut)
	}
	demo := startCVM(t, c, "gateway", "--relay", r.URL, "--key", demoKey, "--announce", "--price", "tool:add=3",
		"--wallet-file", srvWallet, "--common-tool", "add", "--category", "math", "--", demoServer(t))
	var demoReady gatewayReady
	demo.ReadyLine(t, &demoReady)
	demo.Stderr.Await(t, 20*time.Second, `msg=announced`)

	// Pictures: one HTML page pretending to be one. It is on loopback, so
	// the page neither fetches nor offers it (outbound refuses the
	// address); catalogpage's tests check the type on an allowed address.
	pics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		fmt.Fprint(w, `<html><script>window.pwned6=1</script></html>`)
	}))
	defer pics.Close()

	clientKey := filepath.Join(dir, "client.key")
	if code, _, errOut := c.run("keygen", "--out", clientKey); code != 0 {
		t.Fatal(errOut)
	}
	cat := startCVM(t, c, "discover", "--serve", "127.0.0.1:0", "--relay", r.URL, "--key", clientKey,
		"--wallet-file", opWallet, "--max-sats", "5")
	var ready struct {
		Ready  bool   `json:"ready"`
		URL    string `json:"url"`
		Budget string `json:"budget"`
	}
	cat.ReadyLine(t, &ready)
	if !ready.Ready || !strings.HasPrefix(ready.URL, "http://127.0.0.1:") || !strings.Contains(ready.Budget, "5 sats") {
		t.Fatalf("ready line %+v", ready)
	}

	visitor := browser.Person(t, "visitor", 1280, 900)
	visitor.Do("open the catalog", chromedp.Navigate(ready.URL))
	visitor.WaitFor("the priced server", serverCount(1)+` && document.body.textContent.includes("3 sats")`)
	visitor.Shot("01-one-server")

	// Announced while the page is open: it appears live.
	evKey := filepath.Join(dir, "everything.key")
	if code, _, errOut := c.run("keygen", "--out", evKey); code != 0 {
		t.Fatal(errOut)
	}
	ev := startCVM(t, c, "gateway", "--relay", r.URL, "--key", evKey, "--announce", "--", node, everything, "stdio")
	var evReady gatewayReady
	ev.ReadyLine(t, &evReady)
	visitor.WaitFor("server-everything, live", serverCount(2)+` && !!document.querySelector('li.server[data-pubkey="`+evReady.Pubkey+`"] li[data-tool="echo"]')`)
	hostileKey := publishHostile(t, r.URL, pics.URL+"/pic.png")
	visitor.WaitFor("the hostile server", serverCount(3))
	visitor.Shot("02-three-servers")
	if got := browsertest.Eval[string](visitor, `[typeof window.pwned, typeof window.pwned2, typeof window.pwned3, typeof window.pwned5, typeof window.pwned6,
	  document.querySelectorAll("#servers script, #servers b, #servers img[onerror]").length].join(",")`); got != "undefined,undefined,undefined,undefined,undefined,0" {
		t.Errorf("hostile announcement had effects: %s", got)
	}
	visitor.WaitFor("the non-image picture dropped", `!document.querySelector('li.server[data-pubkey="`+hostileKey.Hex()+`"] img')`)
	resp, err := http.Get(ready.URL + "api/picture/" + hostileKey.Hex())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an HTML picture is served: %d", resp.StatusCode)
	}

	// Filters narrow the list and live in the URL; a reload keeps them.
	visitor.Do("filter by tool", chromedp.SendKeys("#f-tool", "get-sum"))
	visitor.WaitFor("only server-everything", serverCount(1)+` && location.search === "?tool=get-sum"`)
	visitor.Do("reload", chromedp.Reload())
	visitor.WaitFor("the filter after a reload", `document.getElementById("f-tool").value === "get-sum" && `+serverCount(1))
	visitor.Shot("03-filtered")
	// The tool the filter names is marked, first; the server's other tools
	// are folded away.
	evTools := browsertest.Eval[int](visitor, `fetch("/api/servers").then(r => r.json()).then(b => b.servers.find(s => s.pubkey === "`+evReady.Pubkey+`").tools.length)`)
	if got := browsertest.Eval[string](visitor, `[...document.querySelectorAll("#servers li.match")].map(li => li.dataset.tool + ":" +
	  (li.parentElement.firstElementChild === li) + ":" + li.textContent.includes("matches the filter")).join() + " " +
	  [...document.querySelectorAll("#servers li[data-tool]")].filter(li => li.checkVisibility()).length + " " +
	  (document.querySelector("#servers details.others:not([open]) summary") || {}).textContent`); got != "get-sum:true:true 1 "+fmt.Sprint(evTools-1)+" other tools" {
		t.Errorf("?tool=get-sum: (marked:first:badge, tools shown, folded) %s", got)
	}
	visitor.Do("filter by category", chromedp.Click("#f-clear"), chromedp.SendKeys("#f-category", "math"))
	visitor.WaitFor("only the demo server", serverCount(1)+` && location.search === "?category=math"`)
	visitor.Do("add at most 2", chromedp.SendKeys("#f-tool", "add"), chromedp.SendKeys("#f-price", "2"))
	visitor.WaitFor("no add at 2 or less", serverCount(0)+` && location.search === "?tool=add&category=math&max_price=2"`)
	visitor.Do("add at most 3", chromedp.SendKeys("#f-price", "\b3"))
	visitor.WaitFor("add at 3", serverCount(1)+` && location.search === "?tool=add&category=math&max_price=3"`)
	visitor.Do("search text", chromedp.Click("#f-clear"))
	visitor.WaitFor("all again", serverCount(3)+` && location.search === ""`)
	visitor.Do("search text", chromedp.SendKeys("#f-text", "long about"))
	visitor.WaitFor("text search", serverCount(1))
	visitor.Do("clear", chromedp.Click("#f-clear"))
	visitor.WaitFor("all again", serverCount(3))

	// Try it: echo on server-everything.
	tryBtn := func(pub, tool string) string {
		return `li.server[data-pubkey="` + pub + `"] li[data-tool="` + tool + `"] button`
	}
	// The panel opens where the person clicked, right under the tool,
	// however far down the list (not at the top of the page), with its
	// first field focused and in view; the same button closes it.
	if n := browsertest.Eval[int](visitor, `document.querySelectorAll("#servers li[data-tool] button").length`); n < 10 {
		t.Fatalf("the catalog lists %d tools; the panel's place is tested on a long list", n)
	}
	visitor.Do("try echo", chromedp.Click(tryBtn(evReady.Pubkey, "echo")))
	visitor.WaitFor("the echo form", `!!document.querySelector("#try-form input[name=message]")`)
	if top, height := visitor.OpenedInPlace("the echo panel", tryBtn(evReady.Pubkey, "echo"), "#try-form", 40); top < height {
		t.Errorf("echo's Try it is %d px down the page, within the first %d px screen: the test tells nothing", top, height)
	}
	visitor.Shot("04a-try-echo-in-place")
	visitor.Do("close echo's panel", chromedp.Click(tryBtn(evReady.Pubkey, "echo")))
	visitor.WaitFor("the panel closed", `!document.getElementById("try-form") && document.querySelector('`+tryBtn(evReady.Pubkey, "echo")+`').getAttribute("aria-expanded") === "false"`)
	visitor.Do("try echo again", chromedp.Click(tryBtn(evReady.Pubkey, "echo")))
	visitor.WaitFor("the echo form", `!!document.querySelector("#try-form input[name=message]")`)
	visitor.Do("call echo", chromedp.SendKeys(`#try-form input[name=message]`, "from the catalog "+hostile), chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("echo's result", `document.querySelector("#try-form .result").textContent.includes("Echo: from the catalog <script>")`)
	visitor.Shot("04-try-echo")
	if got := browsertest.Eval[string](visitor, `[typeof window.pwned, typeof window.pwned2, document.querySelectorAll("#try-form script, #try-form b").length].join(",")`); got != "undefined,undefined,0" {
		t.Errorf("hostile tool output had effects: %s", got)
	}
	// The list is rebuilt as filters change (and live): the panel moves
	// with its tool, as it is; while the tool is not listed it waits, and
	// comes back with it.
	echoPanel := `(() => { const f = document.getElementById("try-form"), b = document.querySelector('` + tryBtn(evReady.Pubkey, "echo") + `');
	  return !!f && !!b && b.parentElement.contains(f) && b.getAttribute("aria-expanded") === "true" &&
	    f.querySelector("input[name=message]").value === "from the catalog " + ` + mustString(hostile) + ` &&
	    f.querySelector(".result").textContent.includes("Echo: from the catalog <script>"); })()`
	visitor.Do("filter by tool echo", chromedp.SendKeys("#f-tool", "echo"))
	visitor.WaitFor("the panel, kept, under echo marked", `location.search === "?tool=echo" && !!document.querySelector('li.match[data-tool="echo"] #try-form') && `+echoPanel)
	visitor.Do("filter echo out", chromedp.SendKeys("#f-text", "no server says this"))
	visitor.WaitFor("the panel waiting", serverCount(0)+` && !document.getElementById("try-form") && document.getElementById("status").textContent.includes("not listed now")`)
	visitor.Do("clear", chromedp.Click("#f-clear"))
	visitor.WaitFor("the panel back under echo", serverCount(3)+` && `+echoPanel)
	// An image (a data: URL, which the CSP allows) and structured content
	// from an enum in the form.
	visitor.Do("try get-tiny-image", chromedp.Click(tryBtn(evReady.Pubkey, "get-tiny-image")))
	visitor.WaitFor("its form", `!!document.querySelector("#try-form button[type=submit]") && document.getElementById("try-form").closest("li[data-tool]").dataset.tool === "get-tiny-image"`)
	visitor.Do("call it", chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("the image shown", `(() => { const i = document.querySelector('#try-form .result img[src^="data:image/png;base64,"]'); return i && i.complete && i.naturalWidth > 0; })()`)
	visitor.Shot("04b-image")
	visitor.Do("try get-structured-content", chromedp.Click(tryBtn(evReady.Pubkey, "get-structured-content")))
	visitor.WaitFor("its enum", `!!document.querySelector("#try-form select[name=location]")`)
	visitor.Do("choose Chicago", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#try-form select[name=location]");
	  s.value = [...s.options].find(o => o.textContent === '"Chicago"').value; })()`), chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("structured content", `(document.querySelector("#try-form .structured") || {}).textContent?.includes("temperature")`)
	visitor.Shot("04c-structured")
	// Progress while it runs, then the result.
	visitor.Do("try a long operation", chromedp.Click(tryBtn(evReady.Pubkey, "trigger-long-running-operation")))
	visitor.WaitFor("its form", `!!document.querySelector("#try-form input[name=duration]")`)
	visitor.Do("call it", chromedp.SetValue(`#try-form input[name=duration]`, "2"), chromedp.SetValue(`#try-form input[name=steps]`, "4"), chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("progress", `document.querySelector("#try-form .result").textContent.includes("Running")`)
	visitor.Shot("05-progress")
	visitor.WaitFor("its result", `document.querySelector("#try-form .result").textContent.includes("Done.")`)

	// A priced tool: nothing is paid until the person confirms.
	visitor.Do("try add", chromedp.Click(tryBtn(demoReady.Pubkey, "add")))
	visitor.WaitFor("the add form", `!!document.querySelector("#try-form input[name=a]")`)
	visitor.Do("call add", chromedp.SetValue(`#try-form input[name=a]`, "20"), chromedp.SetValue(`#try-form input[name=b]`, "22"), chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("the confirmation", `!!document.getElementById("confirm-pay") && document.getElementById("confirm-pay").textContent.includes("3 sats")`)
	visitor.Shot("06-confirm-payment")
	// The question is the server's own message ({code, message} as every
	// cvm endpoint answers), not the page's fallback.
	if q := browsertest.Eval[string](visitor, `document.getElementById("confirm-q").textContent`); q != "add costs up to 3 sats a call: confirm to pay" {
		t.Errorf("confirmation question %q", q)
	}
	if bal, _ := ledger.Balance(context.Background(), "operator"); bal != 100 {
		t.Fatalf("paid before the confirmation: balance %d", bal)
	}
	// Each step of the paid call shows as it comes, before the result:
	// what it waits for, what is paid and to whom. Steps and the result
	// are recorded in the order they enter the page (mutation records keep
	// it): on a loaded machine the last steps and the result can arrive in
	// one read and be drawn in one task, which is still in order.
	visitor.Do("watch the steps", chromedp.Evaluate[chromedp.Void](`window.steps = []; window.resultShown = false;
	  new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(n => {
	    if (!n.matches) return;
	    if (n.matches("li.step")) window.steps.push({step: n.dataset.step, text: n.textContent, before: !window.resultShown,
	      early: !document.querySelector("#try-form .result .content")});
	    else if (n.matches(".result .content") || n.querySelector(".content")) window.resultShown = true;
	  }))).observe(document.getElementById("try-form"), {childList: true, subtree: true})`))
	visitor.Do("confirm", chromedp.Click("#confirm-pay"))
	visitor.WaitFor("add's result", `document.querySelector("#try-form .result").textContent.includes("42")`)
	visitor.Shot("07-paid-result")
	if bal, _ := ledger.Balance(context.Background(), "operator"); bal != 97 {
		t.Errorf("operator balance %d after one confirmed call, want 97", bal)
	}
	type step struct {
		Step, Text    string
		Before, Early bool
	}
	steps := browsertest.Eval[[]step](visitor, `window.steps`)
	// The first step is drawn when the call starts, a task of its own well
	// before any answer: the page shows steps as they come, not all at the end.
	if len(steps) == 0 || !steps[0].Early {
		t.Errorf("the first step was not on the page before the result: %+v", steps)
	}
	var kinds []string
	for _, st := range steps {
		kinds = append(kinds, st.Step)
		if st.Step != "done" && !st.Before {
			t.Errorf("step %q shown only with the result", st.Text)
		}
		if (st.Step == "paying" || st.Step == "paid") && !strings.Contains(st.Text, "3 sats to cvm demo server ("+demoReady.Npub+")") {
			t.Errorf("step %q does not say what is paid to whom", st.Text)
		}
	}
	if got := strings.Join(kinds, ","); got != "calling,waiting,paying,paid,waiting,done" {
		t.Errorf("the paid call's steps: %s (%+v)", got, steps)
	}
	if got := browsertest.Eval[string](visitor, `(document.querySelector("#try-form .result .receipt") || {textContent: "none"}).textContent`); got != "Paid 3 sats to cvm demo server ("+demoReady.Npub+")." {
		t.Errorf("after the paid call: receipt %q", got)
	}

	// Another site's page posts a form to "try it" (and to the confirm):
	// refused, nothing called or paid.
	var evilHits int
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		evilHits++
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id=f method=post enctype=text/plain action="%sapi/call"><input name='{"server":"%s","tool":"add","arguments":{"a":1,"b":2},"quote":"x","pad":"' value='"}'></form><script>document.getElementById("f").submit()</script>`, ready.URL, demoReady.Pubkey)
	}))
	defer evil.Close()
	attacker := browser.Person(t, "attacker-site", 1280, 900)
	attacker.Do("visit the other site", chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)))
	attacker.WaitFor("the refusal", `location.pathname === "/api/call" && document.body.textContent.includes("cross_origin")`)
	attacker.Shot("08-cross-site-refused")
	if bal, _ := ledger.Balance(context.Background(), "operator"); bal != 97 {
		t.Errorf("a cross-site post paid: balance %d", bal)
	}
	// The same refusals, request by request.
	for _, rq := range []struct {
		name, origin, host, token, ctype string
		status                           int
	}{
		{"foreign origin", "http://evil.example", "", "", "application/json", 403},
		{"no page token", "same", "", "", "application/json", 403},
		{"forged page token", "same", "", "00.00", "application/json", 403},
		{"rebound host", "", "evil.example:80", "", "application/json", 421},
	} {
		req, _ := http.NewRequest("POST", ready.URL+"api/call", strings.NewReader(`{"server":"`+demoReady.Pubkey+`","tool":"add","arguments":{"a":1,"b":2}}`))
		origin := rq.origin
		if origin == "same" {
			origin = strings.TrimSuffix(ready.URL, "/")
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if rq.host != "" {
			req.Host = rq.host
		}
		if rq.token != "" {
			req.Header.Set("X-CVM-Page-Token", rq.token)
		}
		req.Header.Set("Content-Type", rq.ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != rq.status {
			t.Errorf("%s: status %d, want %d", rq.name, resp.StatusCode, rq.status)
		}
	}
	// A quote is single-use: the page's own token, replayed with a used
	// quote, pays nothing more.
	replay := browsertest.Eval[int](visitor, `fetch("/api/call", {method: "POST", headers: {"Content-Type": "application/json",
	  "X-CVM-Page-Token": document.querySelector('meta[name="cvm-page-token"]').content},
	  body: JSON.stringify({server: "`+demoReady.Pubkey+`", tool: "add", arguments: {a: 1, b: 2}, quote: "0123"})}).then(r => r.status)`)
	if replay != http.StatusConflict {
		t.Errorf("a made-up quote: status %d, want 409", replay)
	}

	// Accessibility, and 375 px.
	visitor.CheckAccessible("catalog")
	visitor.TabReaches("catalog", "#f-text", "#f-tool", "#f-category", "#f-schema", "#f-price", "#f-encrypted", "#f-clear", tryBtn(evReady.Pubkey, "echo"))
	phone := browser.Person(t, "phone", 375, 812)
	// A link to one tool: on a phone the filters fill the screen, and the
	// tool is brought into view.
	phone.Do("open a link to get-sum", chromedp.Navigate(ready.URL+"?tool=get-sum"))
	phone.WaitFor("get-sum in view", `(() => { const li = document.querySelector('#servers li.match[data-tool="get-sum"]'); if (!li) return false;
	  const r = li.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`)
	phone.CheckAccessible("a link to one tool at 375 px")
	phone.Shot("09a-375px-one-tool")
	phone.Do("open the catalog", chromedp.Navigate(ready.URL+"?category=math"))
	phone.WaitFor("the filtered list", serverCount(1)+` && document.getElementById("f-category").value === "math"`)
	phone.CheckAccessible("catalog at 375 px")
	phone.Shot("09-375px")
	phone.Do("the whole catalog", chromedp.Click("#f-clear"))
	phone.WaitFor("every server, the hostile one too", serverCount(3))
	phone.CheckAccessible("the whole catalog at 375 px")
	phone.Shot("09b-375px-all")

	// cvm unannounce: the page drops the server.
	if code, out, errOut := c.run("unannounce", "--key", evKey, "--relay", r.URL); code != 0 || !strings.Contains(out, "announcement") {
		t.Fatalf("unannounce: %d %q %q", code, out, errOut)
	}
	visitor.WaitFor("server-everything gone", serverCount(2)+` && !document.querySelector('li.server[data-pubkey="`+evReady.Pubkey+`"]')`)
	visitor.Shot("10-unannounced")

	// A tool whose input has a nested object and an array: the form asks
	// for JSON, a valid value reaches the tool intact, and invalid JSON is
	// refused in the page with nothing sent.
	shapes, calls := shapesOnNostr(t, r.URL)
	visitor.WaitFor("the shapes server", serverCount(3)+` && !!document.querySelector('`+tryBtn(shapes, "configure")+`')`)
	visitor.Do("try configure", chromedp.Click(tryBtn(shapes, "configure")))
	visitor.WaitFor("JSON fields for the object and the array", `(() => { const f = document.getElementById("try-form");
	  const o = f.querySelector("textarea[name=options]"), p = f.querySelector("textarea[name=points]");
	  return o && p && f.querySelector('label[for="' + o.id + '"]').textContent.includes("object") &&
	    f.querySelector('label[for="' + p.id + '"]').textContent.includes("array"); })()`)
	visitor.Shot("11-json-fields")
	callsMade := `performance.getEntriesByType("resource").filter(e => e.name.endsWith("/api/call")).length`
	before := browsertest.Eval[int](visitor, callsMade)
	visitor.Do("call configure with broken JSON",
		chromedp.SetValue(`#try-form input[name=label]`, "square"),
		chromedp.SetValue(`#try-form textarea[name=options]`, `{"depth": 2, "tags": ["a",`),
		chromedp.SetValue(`#try-form textarea[name=points]`, `[{"x": 1.5, "y": -2}]`),
		chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("the inline JSON error", `(document.querySelector('#try-form .result .error[role="alert"]') || {}).textContent?.startsWith("options is not valid JSON")`)
	visitor.Shot("12-json-error")
	if n := browsertest.Eval[int](visitor, callsMade); n != before {
		t.Errorf("broken JSON was sent: %d calls, want %d", n, before)
	}
	visitor.Do("call configure with valid JSON",
		chromedp.SetValue(`#try-form textarea[name=options]`, `{"depth": 2, "tags": ["a", "b c"]}`),
		chromedp.SetValue(`#try-form textarea[name=points]`, `[{"x": 1.5, "y": -2}, {"x": 0, "y": 3}]`),
		chromedp.Click(`#try-form button[type=submit]`))
	visitor.WaitFor("configure's echo", `document.querySelector("#try-form .result").textContent.includes('"tags":["a","b c"]') && !document.querySelector("#try-form .result .error")`)
	visitor.Shot("13-json-result")
	want := shapeIn{Label: "square", Options: shapeOptions{Depth: 2, Tags: []string{"a", "b c"}}, Points: []shapePoint{{1.5, -2}, {0, 3}}}
	select {
	case got := <-calls:
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the tool got %+v, want %+v", got, want)
		}
	default:
		t.Fatal("the page showed a result the tool never produced")
	}
	if len(calls) != 0 {
		t.Errorf("%d more calls reached the tool (the broken JSON?)", len(calls))
	}

	// The schema and encryption filters narrow the list, live in the URL
	// and survive a reload. Only the demo server claims a common schema (for
	// add); the hostile server alone does not support encryption.
	visitor.Do("close the try-it panel", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#try-form button")].find(b => b.textContent === "Close").click()`))
	visitor.WaitFor("the panel closed, the focus back on its button", `!document.getElementById("try-form") && document.activeElement === document.querySelector('`+tryBtn(shapes, "configure")+`')`)
	hash := browsertest.Eval[string](visitor, `fetch("/api/servers").then(r => r.json()).then(b =>
	  b.servers.find(s => s.pubkey === "`+demoReady.Pubkey+`").tools.find(t => t.name === "add").schemaHash)`)
	if len(hash) != 64 {
		t.Fatalf("the demo's add has schema hash %q", hash)
	}
	onlyDemo := serverCount(1) + ` && !!document.querySelector('li.server[data-pubkey="` + demoReady.Pubkey + `"]')`
	visitor.Do("filter by schema", chromedp.SendKeys("#f-schema", hash))
	visitor.WaitFor("only the demo server", onlyDemo+` && location.search === "?schema=`+hash+`"`)
	visitor.Do("reload", chromedp.Reload())
	visitor.WaitFor("the schema filter after a reload", `document.getElementById("f-schema").value === "`+hash+`" && `+onlyDemo)
	visitor.Shot("14-schema-filter")
	visitor.Do("clear", chromedp.Click("#f-clear"))
	visitor.WaitFor("all again", serverCount(3)+` && location.search === ""`)
	encryptedOnly := serverCount(2) + ` && ["` + demoReady.Pubkey + `", "` + shapes + `"].every(k => document.querySelector('li.server[data-pubkey="' + k + '"]'))`
	visitor.Do("encrypted only", chromedp.Click("#f-encrypted"))
	visitor.WaitFor("the encrypted servers", encryptedOnly+` && location.search === "?encrypted=1"`)
	visitor.Do("reload", chromedp.Reload())
	visitor.WaitFor("the encryption filter after a reload", `document.getElementById("f-encrypted").checked && `+encryptedOnly)
	visitor.Shot("15-encrypted-filter")
	visitor.Do("clear", chromedp.Click("#f-clear"))
	visitor.WaitFor("all again", serverCount(3)+` && location.search === "" && !document.getElementById("f-encrypted").checked`)
	if evilHits == 0 {
		t.Error("the other site was never visited")
	}
}

// A screenshot tool (Chromium's command line, headless, with a virtual
// time budget) sees the list: the page loads it with a plain fetch, and
// holds no stream open that would keep the budget from running out.
func TestCatalogPage_HeadlessScreenshotShowsTheList(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	shapes, _ := shapesOnNostr(t, r.URL)
	clientKey := filepath.Join(t.TempDir(), "client.key")
	if code, _, errOut := c.run("keygen", "--out", clientKey); code != 0 {
		t.Fatal(errOut)
	}
	cat := startCVM(t, c, "discover", "--serve", "127.0.0.1:0", "--relay", r.URL, "--key", clientKey)
	var ready struct{ URL string }
	cat.ReadyLine(t, &ready)
	// The catalog has the server (a person's browser shows it) before the
	// screenshot is taken.
	visitor := browser.Person(t, "visitor", 1280, 900)
	visitor.Do("open the catalog", chromedp.Navigate(ready.URL))
	visitor.WaitFor("the server", `!!document.querySelector('li.server[data-pubkey="`+shapes+`"]')`)

	dom, png := browsertest.Headless(t, "catalog", ready.URL, 5*time.Second, 1280, 900)
	if !strings.Contains(dom, `data-pubkey="`+shapes+`"`) || !strings.Contains(dom, `data-tool="configure"`) || !strings.Contains(dom, ">1 server.<") {
		t.Errorf("the headless DOM has no list:\n%s", dom)
	}
	if len(png) < 1000 {
		t.Errorf("a screenshot of %d bytes", len(png))
	}
}
