package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/chromedp/chromedp"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/internal/browsertest"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/social"
)

// announcedDemo serves the demo server on r with its add announced as a
// common tool.
func announcedDemo(t *testing.T, r *relay.Server, name string, key nostr.SecretKey) nostr.PubKey {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(key), Relays: []string{r.URL},
		Info: contextvm.ServerInfo{Name: name}, Announce: true, CommonTools: []string{"add"},
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), demoserver.New())
	t.Cleanup(func() { srv.Close() })
	return srv.PublicKey()
}

// signedBy is evt signed by sk.
func signedBy(t *testing.T, sk nostr.SecretKey, evt nostr.Event) nostr.Event {
	t.Helper()
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

type rankedJSON struct {
	Pubkey     string `json:"pubkey"`
	Name       string `json:"name"`
	Reputation struct {
		Score float64 `json:"score"`
		Why   string  `json:"why"`
	} `json:"reputation"`
	Tools []struct {
		Name       string `json:"name"`
		SchemaHash string `json:"schemaHash"`
	} `json:"tools"`
}

// reputationFixture is a relay with two servers implementing add for
// free: Basic, first by name and by key (the last tie breaker), reviewed only by 50
// keys nobody follows; Good, reviewed with five stars by three people the
// user (c's identity) follows.
func reputationFixture(t *testing.T) (r *relay.Server, c *cli, good, plain nostr.PubKey) {
	r = relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: 1e6, EventBurst: 1e6}})
	goodKey, plainKey := nostr.Generate(), nostr.Generate()
	if goodKey.Public().Hex() < plainKey.Public().Hex() {
		goodKey, plainKey = plainKey, goodKey
	}
	good, plain = announcedDemo(t, r, "Good", goodKey), announcedDemo(t, r, "Basic", plainKey)
	me, friends := nostr.Generate(), []nostr.SecretKey{nostr.Generate(), nostr.Generate(), nostr.Generate()}
	c = newCLI(t)
	c.env[secretenv.SecretKey] = me.Hex()

	follows := nostr.Event{Kind: nostr.KindFollowList, CreatedAt: nostr.Now()}
	for _, f := range friends {
		follows.Tags = append(follows.Tags, nostr.Tag{"p", f.Public().Hex()})
	}
	evts := []nostr.Event{signedBy(t, me, follows)}
	reviewOf := func(server nostr.PubKey, rating int) nostr.Event {
		evt, err := social.ReviewDraft{Server: server, Rating: rating, Content: "works"}.Event()
		if err != nil {
			t.Fatal(err)
		}
		return evt
	}
	for _, f := range friends {
		evts = append(evts, signedBy(t, f, reviewOf(good, 5)))
	}
	for range 50 {
		evts = append(evts, signedBy(t, nostr.Generate(), reviewOf(plain, 5)))
	}
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	if err := publish(ctx, r.URL, evts); err != nil {
		t.Fatal(err)
	}
	return r, c, good, plain
}

// discover --sort reputation puts Good first and says why; call --schema
// prefers it; --trust-policy reputation calls it untrusted, and never
// Basic; every call is remembered and shows in the next ranking.
func TestDiscoverAndCallByReputation(t *testing.T) {
	r, c, good, plain := reputationFixture(t)

	rank := func() []rankedJSON {
		t.Helper()
		var ranked []rankedJSON
		testwait.Eventually(t, 20*time.Second, "both servers announced with add", func() bool {
			code, out, errOut := c.run("discover", "--relay", r.URL, "--sort", "reputation", "--json", "--timeout", "5s")
			if code != 0 {
				t.Fatalf("discover --sort reputation: %d %s", code, errOut)
			}
			ranked = nil
			return json.Unmarshal([]byte(out), &ranked) == nil && len(ranked) == 2 && len(ranked[0].Tools) > 0 && len(ranked[1].Tools) > 0
		})
		return ranked
	}
	ranked := rank()
	if ranked[0].Pubkey != good.Hex() || !strings.HasPrefix(ranked[0].Reputation.Why, "3 reviews from people you follow (3 rated, average 5.0/5), you have not called it") ||
		ranked[1].Reputation.Why != "no reviews from your web of trust, you have not called it, tools announced today" || ranked[0].Reputation.Score < 60 || ranked[1].Reputation.Score >= 60 {
		t.Fatalf("ranking: %+v", ranked)
	}
	code, out, errOut := c.run("discover", "--relay", r.URL, "--sort", "reputation")
	if i, j := strings.Index(out, "Good  npub"), strings.Index(out, "Basic  npub"); code != 0 || i < 0 || j < i || !strings.Contains(out, "  reputation ") {
		t.Fatalf("text ranking: %d\n%s%s", code, out, errOut)
	}
	hash := ranked[0].Tools[0].SchemaHash

	// Trusting both: the better reputation first, though Basic comes
	// first by key.
	call := func(args ...string) (provider string, stderr string) {
		t.Helper()
		code, out, errOut := c.run(append([]string{"call", "--schema", hash, "add", "a=1", "b=2", "--relay", r.URL, "--timeout", "5s", "--json"}, args...)...)
		var res struct {
			Provider struct {
				Name       string
				Reputation *struct{ Score float64 }
			}
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Provider.Reputation == nil {
			t.Fatalf("call --schema %v: %d %s %s", args, code, out, errOut)
		}
		return res.Provider.Name, errOut
	}
	if name, errOut := call("--trust", good.Hex(), "--trust", plain.Hex()); name != "Good" || !strings.Contains(errOut, "reputation 6") {
		t.Errorf("trusting both: %s answered; %s", name, errOut)
	}
	// Trusting none: Good is admitted by its reputation, Basic never.
	if name, _ := call("--trust-policy", "reputation"); name != "Good" {
		t.Errorf("--trust-policy reputation: %s answered", name)
	}
	code, _, errOut = c.run("call", "--schema", hash, "add", "a=1", "b=2", "--relay", r.URL, "--timeout", "5s", "--trust-policy", "reputation", "--wot", plain.Hex())
	if code != exitProtocol || !strings.Contains(errOut, "none trusted and none with a reputation of 60 or more") {
		t.Errorf("rooted elsewhere, nobody is admitted: %d %s", code, errOut)
	}

	// A direct call is remembered too, and both show in the ranking.
	if code, _, errOut := c.run("call", plain.Hex(), "add", "a=1", "b=2", "--relay", r.URL); code != 0 {
		t.Fatalf("direct call: %d %s", code, errOut)
	}
	ranked = rank()
	if !strings.Contains(ranked[0].Reputation.Why, "100% of your 2 calls succeeded, p50 ") || !strings.Contains(ranked[1].Reputation.Why, "100% of your 1 call succeeded, p50 ") {
		t.Errorf("after the calls: %+v", ranked)
	}

	for _, args := range [][]string{
		{"discover", "--relay", r.URL, "--sort", "price"},
		{"discover", "--relay", r.URL, "--sort", "reputation", "--watch"},
		{"discover", "--relay", r.URL, "--sort", "reputation", "--wot", "npub1nope"},
	} {
		if code, _, errOut := c.run(args...); code != exitLocal || errOut == "" {
			t.Errorf("%v: %d %q", args, code, errOut)
		}
	}
}

// The catalog page of discover --serve --sort reputation lists Good first
// with its score and why, as text; sorting by name puts Basic first.
func TestCatalogPage_RankedByReputation(t *testing.T) {
	r, c, good, plain := reputationFixture(t)
	cat := startCVM(t, c, "discover", "--serve", "127.0.0.1:0", "--relay", r.URL, "--sort", "reputation")
	var ready struct{ URL string }
	cat.ReadyLine(t, &ready)
	visitor := browser.Person(t, "visitor", 1280, 900)
	visitor.Do("open the catalog", chromedp.Navigate(ready.URL))
	order := `[...document.querySelectorAll("#servers > li.server")].map(li => li.dataset.pubkey).join(",")`
	visitor.WaitFor("both servers, Good first", order+` === "`+good.Hex()+","+plain.Hex()+`"`)
	why := browsertest.Eval[string](visitor, `document.querySelector('li.server[data-pubkey="`+good.Hex()+`"] .reputation').textContent`)
	if !strings.HasPrefix(why, "reputation ") || !strings.Contains(why, "3 reviews from people you follow (3 rated, average 5.0/5)") {
		t.Errorf("Good's reputation on the page: %q", why)
	}
	visitor.Shot("reputation-ranked")
	browsertest.Eval[bool](visitor, `(s => { s.value = "name"; return s.dispatchEvent(new Event("input")); })(document.getElementById("f-sort"))`)
	visitor.WaitFor("Basic first, by name", order+` === "`+plain.Hex()+","+good.Hex()+`" && location.search === "?sort=name"`)
}
