package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/browsertest"
	"github.com/cvmgo/cvm/mcpx/room"
)

// hostile is markup that would run script if the page ever parsed peer text
// as HTML.
const hostile = `<script>window.pwned=1</script><img src=x onerror="window.pwned2=1"><b onmouseover="window.pwned3=1">x</b>`

// joinRoom fills in the join form the way a person does and waits for the
// room to show.
func joinRoom(p *browsertest.Person, page, topic, token string) {
	p.Do("open the page", chromedp.Navigate(page), chromedp.WaitVisible("#topic"))
	p.Do("fill in the join form",
		chromedp.SendKeys("#topic", topic),
		chromedp.SendKeys("#token", token),
		chromedp.Click("#join-btn"))
	p.WaitFor("the room", `!document.getElementById("room").hidden && document.getElementById("status").textContent.startsWith("Connected")`)
}

// sayInPage types a chat message and sends it.
func sayInPage(p *browsertest.Person, text string, markdown bool) {
	p.Do("type a message", chromedp.SetValue("#msg", text))
	if markdown {
		p.Do("tick markdown", chromedp.Click("#md"))
	}
	p.Do("send", chromedp.Click("#send"))
	if markdown {
		p.Do("untick markdown", chromedp.Click("#md"))
	}
}

// logHas is a condition: a chat line containing text is shown.
func logHas(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#log li.chat")].some(li => li.textContent.includes(%q))`, text)
}

// noTokenAnywhere fails if the token is in the page's URL, cookies, storage,
// resource URLs or logs, or left in the token field.
func noTokenAnywhere(t *testing.T, p *browsertest.Person, token string) {
	t.Helper()
	where := browsertest.Eval[[]string](p, fmt.Sprintf(`(() => { const tok = %q; const out = [];
	  if (location.href.includes(tok)) out.push("URL");
	  if (document.cookie.includes(tok)) out.push("cookie");
	  for (const s of [localStorage, sessionStorage]) for (let i = 0; i < s.length; i++) if ((s.getItem(s.key(i)) || "").includes(tok)) out.push("storage");
	  for (const e of performance.getEntries()) if (e.name.includes(tok)) out.push("resource " + e.name);
	  if (document.getElementById("token").value) out.push("token field");
	  if (document.documentElement.outerHTML.includes(tok)) out.push("DOM");
	  if (document.cookie !== "" || localStorage.length || sessionStorage.length) out.push("something stored");
	  return out; })()`, token))
	if len(where) > 0 {
		t.Errorf("%s: the token is in: %v", p.Name, where)
	}
	for _, l := range p.Logs() {
		if strings.Contains(l, token) {
			t.Errorf("%s: the token is in the console: %q", p.Name, l)
		}
	}
}

// mintExpired signs a token for id with the gateway's HS256 key in its data
// directory, expired an hour ago: far past the 30 s skew the gateway allows,
// and a token Keys.Sign refuses to make.
func mintExpired(t *testing.T, data, topic, id string) string {
	t.Helper()
	b64, err := os.ReadFile(filepath.Join(data, room.HSKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b64)))
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	claims, _ := json.Marshal(room.Claims{Subject: id, Audience: room.Audience{topic}, ExpiresAt: past.Unix(), IssuedAt: past.Add(-time.Hour).Unix(), Kind: "human"})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signing))
	tok := signing + "." + enc.EncodeToString(m.Sum(nil))
	// The gateway's own verifier must call it expired, not forged.
	keys, err := room.LoadOrCreateKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Verify(tok, time.Now()); !errors.Is(err, room.ErrTokenExpired) {
		t.Fatalf("the minted token: %v, want expired", err)
	}
	return tok
}

// Two people in browsers, a terminal chat and a bridged stdio server share a
// room: they chat both ways (plain and markdown), the page reads history
// back, calls the bridged server's tools through a schema form, shows
// hostile text as text, keeps the token to itself, is accessible at 375 px,
// and recovers when the gateway comes back.
func TestRoomPage_PeopleChatCallToolsSafely(t *testing.T) {
	node, everything := serverEverything(t)
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready struct {
		roomReady
		Page string `json:"page"`
	}
	gw.ReadyLine(t, &ready)
	if ready.Page != ready.REST+"/" {
		t.Fatalf("ready line page %q, want %q", ready.Page, ready.REST+"/")
	}
	const topic = "room:web"

	// Earlier conversation, more than one page of history.
	dave := roomDial(t, ready.URL, topic, mint(t, c, "--data", data, "--topic", topic, "--id", "dave"))
	const earlier = 60
	for i := 1; i <= earlier; i++ {
		env := fmt.Sprintf(`{"protocol":"mcp-x/v0","id":"old-%d","ts":"2026-01-01T00:00:00Z","from":"dave","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"earlier message %d"}}}`, i, i)
		if err := dave.Write(context.Background(), websocket.MessageText, []byte(env)); err != nil {
			t.Fatal(err)
		}
	}
	for echoes := 0; echoes < earlier; {
		if m := roomRead(t, dave); strings.HasPrefix(fmt.Sprint(m["id"]), "old-") {
			echoes++
		}
	}
	dave.Close(websocket.StatusNormalClosure, "")

	tokenFile := filepath.Join(t.TempDir(), "alpha.token")
	os.WriteFile(tokenFile, []byte(mint(t, c, "--data", data, "--topic", topic, "--id", "alpha", "--kind", "robot")+"\n"), 0o600)
	bridge := startCVM(t, c, "room", "bridge", "--gateway", ready.REST, "--topic", topic, "--token-file", tokenFile, "--", node, everything, "stdio")
	var bready struct{ Ready bool }
	bridge.ReadyLine(t, &bready)

	carol := startPiped(t, c, "--json", "room", "chat", "--gateway", ready.REST, "--topic", topic,
		"--token", mint(t, c, "--data", data, "--topic", topic, "--id", "carol", "--kind", "human"))
	carol.expectJSON(t, "ready", nil)

	aliceTok := mint(t, c, "--data", data, "--topic", topic, "--id", "alice", "--name", "Alice", "--kind", "human")
	bobTok := mint(t, c, "--data", data, "--topic", topic, "--id", "bob", "--name", "Bob", "--kind", "human")
	alice := browser.Person(t, "alice", 1280, 900)
	bob := browser.Person(t, "bob", 375, 812)

	// A wrong token is refused with a clear message, before anything else.
	alice.Do("open the page", chromedp.Navigate(ready.Page), chromedp.WaitVisible("#topic"))
	alice.Shot("01-join-form")
	alice.CheckAccessible("join form")
	alice.TabReaches("join form", "#topic", "#token", "#join-btn")
	// An expired token: the person is told it expired (not that it is
	// invalid), and nothing else happens: no WebSocket, no retry, no room.
	alice.Do("count the page's WebSockets", chromedp.Evaluate[chromedp.Void](`window.sockets = 0; (() => { const W = window.WebSocket;
	  window.WebSocket = function (...a) { window.sockets++; return new W(...a); }; })()`))
	expired := mintExpired(t, data, topic, "alice")
	alice.Do("join with an expired token", chromedp.SendKeys("#topic", topic), chromedp.SendKeys("#token", expired), chromedp.Click("#join-btn"))
	alice.WaitFor("the expiry", `document.getElementById("status").textContent.includes("token expired at")`)
	alice.Shot("02a-expired-token")
	if got := browsertest.Eval[string](alice, `[document.getElementById("status").textContent.includes("invalid token"), document.getElementById("room").hidden,
	  document.getElementById("join").hidden, document.getElementById("token").value === "",
	  performance.getEntriesByType("resource").filter(e => e.name.includes("/v0/")).length].join(",")`); got != "false,true,false,true,1" {
		t.Errorf("after an expired token (invalid shown, room hidden, form hidden, token field empty, gateway requests): %s", got)
	}
	noTokenAnywhere(t, alice, expired)
	alice.Do("clear the topic", chromedp.Evaluate[chromedp.Void](`document.getElementById("topic").value = ""`))
	alice.Do("join with a bad token", chromedp.SendKeys("#topic", topic), chromedp.SendKeys("#token", "not-a-token"), chromedp.Click("#join-btn"))
	alice.WaitFor("the refusal", `document.getElementById("status").textContent.includes("invalid token")`)
	alice.Shot("02-bad-token")
	// Still no WebSocket, and the expired attempt left no retry behind.
	if n := browsertest.Eval[int](alice, `window.sockets`); n != 0 {
		t.Errorf("refused tokens opened %d WebSockets", n)
	}

	joinRoom(alice, ready.Page, topic, aliceTok)
	joinRoom(bob, ready.Page, topic, bobTok)
	for _, p := range []*browsertest.Person{alice, bob} {
		p.WaitFor("everyone in the roster", `["alice", "bob", "carol", "alpha"].every(id => document.querySelector('#participants li[data-id="' + id + '"]'))`)
		p.WaitFor("the latest history", logHas("earlier message 60"))
	}
	alice.Shot("03-joined")
	bob.Shot("03-joined-375px")
	oldest := `[...document.querySelectorAll("#log li.chat .body")].some(b => b.textContent === "earlier message 1")`
	if browsertest.Eval[bool](alice, oldest) {
		t.Error("the first page of history already shows the oldest message")
	}

	// History by scrolling back: the oldest messages come in at the top.
	alice.Do("scroll to the top", chromedp.Evaluate[chromedp.Void](`document.getElementById("log").scrollTop = 0; document.getElementById("log").dispatchEvent(new Event("scroll"))`))
	alice.WaitFor("older history", oldest+` && document.getElementById("older").disabled`)
	order := browsertest.Eval[[]int](alice, `[...document.querySelectorAll("#log li.chat")].map(li => Number(li.dataset.seq))`)
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("chat not in seq order: %v", order)
		}
	}
	alice.Shot("04-history")

	// Chat: page to page, page to terminal, terminal to page.
	sayInPage(alice, "hello from alice", false)
	bob.WaitFor("alice's message", logHas("hello from alice"))
	carol.expectJSON(t, "chat", func(m map[string]any) bool { return m["from"] == "alice" && m["text"] == "hello from alice" })
	carol.say(t, "hi from the terminal")
	alice.WaitFor("carol's message", logHas("hi from the terminal"))
	bob.WaitFor("carol's message", logHas("hi from the terminal"))
	sayInPage(bob, "**bold** and `code` and [docs](https://example.com/x) and [bad](javascript:window.pwned4=1)\n\n- one\n- two", true)
	alice.WaitFor("bob's markdown", `(() => { const li = [...document.querySelectorAll("#log li.chat")].pop();
	  return li && li.querySelector("strong")?.textContent === "bold" && li.querySelector("code")?.textContent === "code" && li.querySelectorAll("ul li").length === 2; })()`)
	links := browsertest.Eval[[]string](alice, `[...document.querySelectorAll("#log a")].map(a => a.href + " " + a.rel)`)
	if len(links) != 1 || !strings.HasPrefix(links[0], "https://example.com/x ") || !strings.Contains(links[0], "noopener") {
		t.Errorf("links in the markdown: %q; want only the https one, rel=noopener", links)
	}
	m := carol.expectJSON(t, "chat", func(m map[string]any) bool { return m["from"] == "bob" })
	if m["format"] != "markdown" {
		t.Errorf("carol got %v, want format markdown", m)
	}
	alice.Do("scroll to the newest", chromedp.Evaluate[chromedp.Void](`document.getElementById("log").scrollTop = 1e9`))
	alice.Shot("05-chat")
	bob.Shot("05-chat-375px")

	// Hostile chat, plain and markdown, shows as text and runs nothing.
	carol.say(t, hostile)
	carol.say(t, "/md "+hostile)
	for _, p := range []*browsertest.Person{alice, bob} {
		p.WaitFor("the hostile messages", fmt.Sprintf(`[...document.querySelectorAll("#log li.chat")].filter(li => li.textContent.includes(%q)).length === 2`, `<script>window.pwned=1</script>`))
		if got := browsertest.Eval[string](p, `[typeof window.pwned, typeof window.pwned2, typeof window.pwned3, typeof window.pwned4, document.querySelectorAll("#log script, #log img, #log b").length].join(",")`); got != "undefined,undefined,undefined,undefined,0" {
			t.Errorf("%s: hostile chat had effects: %s", p.Name, got)
		}
	}
	alice.Shot("06-hostile-chat")

	// A bridged stdio server's tools, listed and called through the form.
	alice.Do("list alpha's tools", chromedp.Click(`#participants li[data-id="alpha"] button`))
	alice.WaitFor("alpha's tools", `[...document.querySelectorAll("#tools .tool-list button")].some(b => b.textContent === "echo")`)
	alice.Shot("07-tools")
	// The form opens where the person clicked, right under the tool (not
	// under the whole list), with its first field focused and in view.
	if n := browsertest.Eval[int](alice, `document.querySelectorAll("#tools .tool-list button").length`); n < 10 {
		t.Fatalf("alpha lists %d tools; the form's place is tested on a long list", n)
	}
	alice.Do("choose echo", chromedp.Click(`#tools .tool-list button[data-tool="echo"]`))
	alice.WaitFor("the echo form", `!!document.querySelector("#tool-call input[name=message]")`)
	alice.OpenedInPlace("the echo form", `#tools .tool-list button[data-tool="echo"]`, "#tool-call", 40)
	alice.Shot("07b-tool-form")
	alice.Do("call echo with nothing", chromedp.Click(`#tool-call button[type=submit]`))
	alice.WaitFor("the missing-field error", `document.querySelector("#tool-call .result").textContent.includes("message is required")`)
	alice.Do("call echo", chromedp.SetValue(`#tool-call input[name=message]`, "through the page "+hostile), chromedp.Click(`#tool-call button[type=submit]`))
	alice.WaitFor("echo's result", `document.querySelector("#tool-call .result").textContent.includes("Echo: through the page <script>")`)
	if got := browsertest.Eval[string](alice, `[typeof window.pwned, typeof window.pwned2, document.querySelectorAll("#tools script, #tools img").length].join(",")`); got != "undefined,undefined,0" {
		t.Errorf("hostile tool output had effects: %s", got)
	}
	alice.Shot("08-tool-result")
	// A tool with numbers and an error from the server.
	alice.Do("choose get-sum", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#tools .tool-list button")].find(b => b.textContent === "get-sum").click()`))
	alice.WaitFor("the get-sum form", `!!document.querySelector("#tool-call input[name=a][type=number]")`)
	alice.Do("call get-sum", chromedp.SetValue(`#tool-call input[name=a]`, "2"), chromedp.SetValue(`#tool-call input[name=b]`, "40"), chromedp.Click(`#tool-call button[type=submit]`))
	alice.WaitFor("get-sum's result", `document.querySelector("#tool-call .result").textContent.includes("The sum of 2 and 40 is 42")`)
	// Progress while a long tool runs.
	alice.Do("choose the long operation", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#tools .tool-list button")].find(b => b.textContent === "trigger-long-running-operation").click()`))
	alice.WaitFor("its form", `!!document.querySelector("#tool-call input[name=duration]")`)
	alice.Do("run it", chromedp.SetValue(`#tool-call input[name=duration]`, "2"), chromedp.SetValue(`#tool-call input[name=steps]`, "4"), chromedp.Click(`#tool-call button[type=submit]`))
	alice.WaitFor("progress", `document.querySelector("#tool-call .result").textContent.includes("Running")`)
	alice.Shot("08b-progress")
	alice.WaitFor("its result", `document.querySelector("#tool-call .result").textContent.includes("Done.")`)
	alice.Do("list the page's own tools from bob", chromedp.Click(`#participants li[data-id="bob"] button`))
	bob.WaitFor("nothing", `true`)
	alice.WaitFor("bob has no tools", `document.getElementById("tools").textContent.includes("bob offers no tools")`)
	alice.Shot("09-page-participant")

	// Envelopes are listed as they arrive.
	if n := browsertest.Eval[int](alice, `document.querySelectorAll("#envelopes li").length`); n < 10 {
		t.Errorf("%d envelopes listed", n)
	}

	// What a person checks: labels, contrast, tab order, 375 px.
	for _, p := range []*browsertest.Person{alice, bob} {
		p.CheckAccessible("room")
		p.TabReaches("room", "#leave", "#log", "#msg", "#md", "#send", `#participants li[data-id="alpha"] button`)
	}

	// The gateway goes away and comes back on the same address.
	if code := gw.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("gateway exit %d", code)
	}
	alice.WaitFor("the disconnection", `document.getElementById("status").textContent.includes("Reconnecting")`)
	alice.Shot("10-gateway-gone")
	addr := strings.TrimPrefix(ready.REST, "http://")
	gw2 := startCVM(t, c, "room", "serve", "--listen", addr, "--data", data)
	gw2.ReadyLine(t, &ready)
	for _, p := range []*browsertest.Person{alice, bob} {
		p.WaitFor("the reconnection", `document.getElementById("status").textContent.startsWith("Connected")`)
	}
	sayInPage(bob, "back again", false)
	alice.WaitFor("bob after the restart", logHas("back again"))
	alice.Shot("11-reconnected")

	// The token stays in page memory: not in any URL, cookie, storage, the
	// console, nor the gateway's log.
	noTokenAnywhere(t, alice, aliceTok)
	noTokenAnywhere(t, bob, bobTok)
	for _, l := range []string{gw.Stderr.String(), gw2.Stderr.String()} {
		if strings.Contains(l, aliceTok) || strings.Contains(l, bobTok) {
			t.Error("a page's token is in the gateway's log")
		}
	}

	// The page's security headers.
	resp, err := http.Get(ready.REST + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self' data:") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}
