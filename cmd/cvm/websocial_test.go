package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/chromedp/chromedp"
	"github.com/cvmgo/cvm/internal/browsertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/social"
)

// publishSigned signs each event with sk and stores it through url.
func publishSigned(t *testing.T, url string, sk nostr.SecretKey, evs ...nostr.Event) {
	t.Helper()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{url}})
	defer pool.Close()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	for _, ev := range evs {
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		if err := pool.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// The catalog page shows a server's profile, notes and reviews, all of
// them hostile markup, as text; its operator publishes a review after
// confirming it; schema and category pages list what they name.
func TestCatalogPage_ProfilesReviewsAndSchemaPages(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	c := newCLI(t)
	key, hex, npub := keygen(t, c)
	g := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--announce", "--common-tool", "add", "--category", "math",
		"--profile-name", "Demo", "--", demoServer(t))
	var ready gatewayReady
	g.ReadyLine(t, &ready)
	g.Stderr.Await(t, 20*time.Second, `msg=announced`)
	// The server's own profile, replaced by a hostile one (as another
	// client could publish with its key), a hostile note, and a stranger's
	// hostile review under a hostile name.
	serverSK, err := nostrx.ReadKeyFile(key)
	if err != nil {
		t.Fatal(err)
	}
	hostileProfile := social.Profile{Name: "Demo " + hostile, About: hostile, Website: "javascript:window.pwned4=1", NIP05: "x@" + hostile}.Event()
	hostileProfile.CreatedAt++
	publishSigned(t, r.URL, serverSK, hostileProfile, social.NoteEvent("note "+hostile))
	stranger := nostr.Generate()
	bad, _ := social.ReviewDraft{Server: nostr.MustPubKeyFromHex(hex), Rating: 1, Content: "review " + hostile}.Event()
	publishSigned(t, r.URL, stranger, social.Profile{Name: "Mallory " + hostile}.Event(), bad)

	opKey, _, opNpub := keygen(t, c)
	cat := startCVM(t, c, "discover", "--serve", "127.0.0.1:0", "--relay", r.URL, "--key", opKey)
	var page struct{ URL string }
	cat.ReadyLine(t, &page)

	visitor := browser.Person(t, "social", 1280, 900)
	visitor.Do("open the catalog", chromedp.Navigate(page.URL))
	visitor.WaitFor("the server", serverCount(1))
	item := `li.server[data-pubkey="` + hex + `"]`
	// The list is drawn again whenever the catalog changes, moving each
	// server's nodes: chromedp's node ids then go stale between finding
	// and clicking, so the person's clicks and typing happen in the page.
	visitor.WaitFor("its profile and reviews opened", `(() => { const d = document.querySelector('`+item+` details.social');
	  if (!d) return false; if (!d.open) d.querySelector("summary").click(); return true; })()`)
	visitor.WaitFor("the profile, note and review", `(() => { const b = document.querySelector('`+item+` .about-box');
	  return !!b && b.textContent.includes("Demo <script>") && b.textContent.includes("note <script>") && b.textContent.includes("review <script>") &&
	    b.textContent.includes("Mallory <script>") && b.textContent.includes("not verified"); })()`)
	visitor.Shot("social-01-hostile-profile")
	if got := browsertest.Eval[string](visitor, `[typeof window.pwned, typeof window.pwned2, typeof window.pwned3, typeof window.pwned4,
	  document.querySelectorAll("#servers script, #servers b, #servers img[onerror], #servers a[href^='javascript']").length].join(",")`); got != "undefined,undefined,undefined,undefined,0" {
		t.Errorf("hostile profile or review had effects: %s", got)
	}

	// The operator's review: nothing is published until confirmed.
	visitor.WaitFor("a review written", `(() => { const f = document.querySelector('`+item+` .review-form');
	  if (!f) return false; f.querySelector("textarea").value = "Works well"; f.querySelector("select").value = "5";
	  f.querySelector("button[type=submit]").click(); return true; })()`)
	visitor.WaitFor("the confirmation", `!!document.querySelector('`+item+` .review-form .confirm-review')`)
	reviews := func() []social.ThreadView {
		code, out, errOut := c.run("reviews", npub, "--relay", r.URL, "--json")
		var got struct{ Threads []social.ThreadView }
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("reviews: %d %s %s", code, out, errOut)
		}
		return got.Threads
	}
	if n := len(reviews()); n != 1 {
		t.Fatalf("%d reviews before the confirmation", n)
	}
	visitor.WaitFor("the review confirmed", `(() => { const b = document.querySelector('`+item+` .review-form .confirm-review');
	  if (!b) return false; b.click(); return true; })()`)
	visitor.WaitFor("the review listed", `[...document.querySelectorAll('`+item+` li.review')].some(li =>
	  li.querySelector(".npub").textContent === "`+opNpub+`" && (li.querySelector(".stars") || {}).textContent === "★★★★★" && li.querySelector(".text").textContent === "Works well")`)
	visitor.Shot("social-02-reviewed")
	got := reviews()
	if len(got) != 2 || got[1].Author != opNpub || got[1].Rating != 5 || got[1].Content != "Works well" || got[1].Announcement == "" {
		t.Fatalf("after the page's review: %+v", got)
	}

	// The schema and category pages, from the links on the main page.
	// Followed by navigating to its address: a click's navigation races
	// the wait's evaluation in the old page.
	schemaURL := browsertest.Eval[string](visitor, `document.querySelector('`+item+` a.schema-link').href`)
	if !strings.HasPrefix(schemaURL, page.URL+"schema/") {
		t.Fatalf("schema link %q", schemaURL)
	}
	if cat := browsertest.Eval[string](visitor, `document.querySelector('`+item+` a.category-link').href`); cat != page.URL+"category/math" {
		t.Errorf("category link %q", cat)
	}
	visitor.Do("follow the schema link", chromedp.Navigate(schemaURL))
	visitor.WaitFor("the schema page", `location.pathname.startsWith("/schema/") && document.getElementById("title").textContent.startsWith("Servers implementing common schema") && `+serverCount(1))
	visitor.Shot("social-03-schema-page")
	visitor.Do("open the category page", chromedp.Navigate(strings.TrimSuffix(page.URL, "/")+"/category/math"))
	visitor.WaitFor("the category page", `document.getElementById("title").textContent === "Servers in category math" && `+serverCount(1))
	visitor.Do("open another category", chromedp.Navigate(strings.TrimSuffix(page.URL, "/")+"/category/none-such"))
	visitor.WaitFor("an empty category", `document.getElementById("title").textContent === "Servers in category none-such" && `+serverCount(0))
}
