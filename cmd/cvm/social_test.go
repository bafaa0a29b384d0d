package main

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/social"
)

// keygen makes a key file and returns its path and public key.
func keygen(t *testing.T, c *cli) (path, hex, npub string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "key")
	code, out, errOut := c.run("keygen", "--out", path, "--json")
	var k struct{ Pubkey, Npub string }
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil {
		t.Fatalf("keygen: %d %s %s", code, out, errOut)
	}
	return path, k.Pubkey, k.Npub
}

// nip05Host serves names over TLS and returns its host:port; c's
// commands reach it (outboundtest's variables).
func nip05Host(t *testing.T, c *cli, names map[string]string) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"names": names})
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	c.env[outboundtest.EnvAllow] = host
	c.env[outboundtest.EnvCA] = writeSecret(t, t.TempDir(), "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	return host
}

type discoveredJSON struct {
	Npub          string `json:"npub"`
	About         string `json:"about"`
	Profile       *struct{ Name, About, NIP05 string }
	NIP05Verified bool `json:"nip05Verified"`
	Notes         []struct{ Content string }
}

// TestSocial_ProfileNotesAndDiscover: the gateway publishes its profile,
// republishes it only when it changes, cvm note publishes as the server,
// cvm discover shows both (the nip05 verified only when it points back),
// and cvm unannounce deletes the profile.
func TestSocial_ProfileNotesAndDiscover(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	key, hex, npub := keygen(t, c)
	host := nip05Host(t, c, map[string]string{"echo": hex, "liar": strings.Repeat("1", 64)})
	gateway := func(name, nip05 string) {
		p := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--announce",
			"--profile-name", name, "--profile-about", "<script>alert(1)</script>", "--profile-nip05", nip05, "--", demoServer(t))
		var ready gatewayReady
		p.ReadyLine(t, &ready)
		p.Stderr.Await(t, 20*time.Second, `msg=announced`)
		p.Stop(t, syscall.SIGTERM)
	}
	profiles := func() []string {
		return queryIDs(t, r.URL, nostr.Filter{Kinds: []nostr.Kind{0}, Authors: []nostr.PubKey{nostr.MustPubKeyFromHex(hex)}})
	}
	gateway("Echo", "echo@"+host)
	first := profiles()
	gateway("Echo", "echo@"+host)
	if again := profiles(); len(first) != 1 || len(again) != 1 || again[0] != first[0] {
		t.Fatalf("an unchanged profile was republished: %v then %v", first, again)
	}
	if code, out, errOut := c.run("note", "v2 is out \x1b[31m", "--relay", r.URL, "--key", key, "--json"); code != 0 || !strings.Contains(out, `"kind":1`) {
		t.Fatalf("note: %d %s %s", code, out, errOut)
	}

	discover := func() discoveredJSON {
		t.Helper()
		code, out, errOut := c.run("discover", "--json", "--relay", r.URL)
		var servers []discoveredJSON
		if code != 0 || json.Unmarshal([]byte(out), &servers) != nil || len(servers) != 1 {
			t.Fatalf("discover: %d %s %s", code, out, errOut)
		}
		return servers[0]
	}
	s := discover()
	if s.Npub != npub || s.Profile == nil || s.Profile.Name != "Echo" || !s.NIP05Verified || len(s.Notes) != 1 || s.Notes[0].Content != "v2 is out \x1b[31m" {
		t.Fatalf("discover --json: %+v", s)
	}
	code, out, _ := c.run("discover", "--relay", r.URL)
	if code != 0 || !strings.Contains(out, "profile: Echo  echo@"+host+" ✓") || !strings.Contains(out, `v2 is out \x1b[31m`) || strings.Contains(out, "\x1b") {
		t.Fatalf("discover:\n%s", out)
	}

	// A changed profile replaces the old; a nip05 naming another key is
	// not verified.
	gateway("Echo 2", "liar@"+host)
	if again := profiles(); len(again) != 1 || again[0] == first[0] {
		t.Fatalf("a changed profile was not republished: %v then %v", first, again)
	}
	if s := discover(); s.Profile == nil || s.Profile.Name != "Echo 2" || s.NIP05Verified {
		t.Fatalf("after the change: %+v", s)
	}

	if code, _, errOut := c.run("unannounce", "--relay", r.URL, "--key", key); code != 0 {
		t.Fatal(errOut)
	}
	if left := profiles(); len(left) != 0 {
		t.Fatalf("profile still served after unannounce: %v", left)
	}
}

func TestSocial_BadProfileFlagsRefused(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{
		{"--profile-picture", "javascript:alert(1)"},
		{"--profile-nip05", "not a name"},
		{"--profile-name", strings.Repeat("x", 300)},
	} {
		code, _, errOut := c.run(append(append([]string{"gateway", "--relay", "ws://127.0.0.1:1"}, args...), "--", "true")...)
		if code == 0 || !strings.Contains(errOut, "--profile-") {
			t.Errorf("%v: code %d, %s", args, code, errOut)
		}
	}
}

type reviewJSON struct {
	ID           string       `json:"id"`
	AuthorName   string       `json:"authorName"`
	Rating       int          `json:"rating"`
	Announcement string       `json:"announcement"`
	Content      string       `json:"content"`
	Replies      []reviewJSON `json:"replies"`
}

// publishProfileAs stores a kind 0 for key through the relay, as another
// client would.
func publishProfileAs(t *testing.T, c *cli, url, key, name string) {
	t.Helper()
	sk, err := nostrx.ReadKeyFile(key)
	if err != nil {
		t.Fatal(err)
	}
	ev := social.Profile{Name: name}.Event()
	ev.Sign(sk)
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{url}})
	defer pool.Close()
	if err := pool.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
}

// TestSocial_ReviewsAcrossAnAnnouncementChange: reviews written before
// and after the server's announcement changes are both found, each
// anchored to the announcement it was written against; a reply nests
// under its review; authors are named by their profiles; the server may
// be named by NIP-05.
func TestSocial_ReviewsAcrossAnAnnouncementChange(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	key, hex, npub := keygen(t, c)
	host := nip05Host(t, c, map[string]string{"echo": hex})
	alice, _, _ := keygen(t, c)
	bob, _, _ := keygen(t, c)
	publishProfileAs(t, c, r.URL, alice, "Alice <img src=x onerror=alert(1)>")
	gateway := func(about string) *proc {
		p := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--announce", "--about", about, "--", demoServer(t))
		var ready gatewayReady
		p.ReadyLine(t, &ready)
		p.Stderr.Await(t, 20*time.Second, `msg=announced`)
		return p
	}
	review := func(args ...string) string {
		t.Helper()
		code, out, errOut := c.run(append([]string{"review", "--relay", r.URL, "--json"}, args...)...)
		var ev struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &ev) != nil {
			t.Fatalf("review %v: %d %s %s", args, code, out, errOut)
		}
		return ev.ID
	}
	gateway("v1").Stop(t, syscall.SIGTERM)
	first := review(npub, "first", "--rating", "4", "--key", alice)
	// Replaceable events created in the same second tie, and the relay
	// keeps the lower id: the new announcement must be a second younger
	// than the old one, and than the first review, which the threads list
	// before the second.
	written := nostr.Now()
	testwait.Eventually(t, 5*time.Second, "the next second", func() bool { return nostr.Now() > written })
	g := gateway("v2")
	review("echo@"+host, "second", "--rating", "2", "--key", bob)
	review(npub, "agreed", "--reply-to", first, "--key", bob)

	code, out, errOut := c.run("reviews", npub, "--relay", r.URL, "--json")
	var got struct{ Threads []reviewJSON }
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.Threads) != 2 {
		t.Fatalf("reviews: %d %s %s", code, out, errOut)
	}
	a, b := got.Threads[0], got.Threads[1]
	if a.ID != first || a.Rating != 4 || a.AuthorName != "Alice <img src=x onerror=alert(1)>" || len(a.Replies) != 1 || a.Replies[0].Content != "agreed" ||
		b.Content != "second" || b.Rating != 2 || a.Announcement == "" || b.Announcement == "" || a.Announcement == b.Announcement {
		t.Fatalf("threads: %s", out)
	}
	if code, out, _ := c.run("reviews", "echo@"+host, "--relay", r.URL); code != 0 || !strings.Contains(out, "★★★★☆  Alice") || !strings.Contains(out, "↳") {
		t.Fatalf("reviews, for a person:\n%s", out)
	}
	// The server's NIP-05 name reaches it.
	if code, out, errOut := c.run("call", "echo@"+host, "add", "a=1", "b=2", "--relay", r.URL); code != 0 || out != `{"sum":3}`+"\n" {
		t.Fatalf("call by NIP-05 name: %d %q %s", code, out, errOut)
	}
	// Without the test's allowance the name's domain is a loopback
	// address, which cvm does not fetch from.
	if code, _, errOut := newCLI(t).run("call", "echo@"+host, "add", "a=1", "b=2", "--relay", r.URL); code == 0 || !strings.Contains(errOut, "not public") {
		t.Fatalf("a NIP-05 name on a private address: %d %s", code, errOut)
	}
	g.Stop(t, syscall.SIGTERM)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{npub, "x", "--rating", "6", "--key", alice}, "--rating 6"},
		{[]string{npub, "x", "--rating", "3", "--reply-to", first, "--key", alice}, "--rating is for a review"},
		{[]string{npub, "x", "--reply-to", strings.Repeat("ab", 32), "--key", alice}, "no such event"},
		{[]string{nostrx.EncodeNpub(nostr.Generate().Public()), "x", "--key", alice}, "has no announcement"},
		{[]string{"nobody@" + host, "x", "--key", alice}, "not found"},
		{[]string{npub, " ", "--key", alice}, "needs text"},
	} {
		if code, _, errOut := c.run(append([]string{"review", "--relay", r.URL}, tc.args...)...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("review %v: code %d, %s", tc.args, code, errOut)
		}
	}
}

// TestSocial_ProfileFromConfigTable: the [profile] table of the config
// file is the profile, as the flags are.
func TestSocial_ProfileFromConfigTable(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	key, hex, _ := keygen(t, c)
	c.writeConfig("[profile]\nname = \"From config\"\nwebsite = \"https://example.com/\"\n")
	p := startCVM(t, c, "gateway", "--relay", r.URL, "--key", key, "--", demoServer(t))
	var ready gatewayReady
	p.ReadyLine(t, &ready)
	code, out, errOut := c.run("discover", "--json", "--relay", r.URL)
	if code != 0 {
		t.Fatal(errOut)
	}
	// Not announced: discover lists nothing, but the profile is on the relay.
	ids := queryIDs(t, r.URL, nostr.Filter{Kinds: []nostr.Kind{0}, Authors: []nostr.PubKey{nostr.MustPubKeyFromHex(hex)}})
	if len(ids) != 1 || out != "[]\n" {
		t.Fatalf("profile events %v; discover %s", ids, out)
	}
	got, err := social.Fetch(t.Context(), relayQuerier(t, r.URL), []nostr.PubKey{nostr.MustPubKeyFromHex(hex)}, social.FetchOptions{})
	if pr := got[nostr.MustPubKeyFromHex(hex)]; err != nil || pr.Profile.Name != "From config" || pr.Profile.Website != "https://example.com/" {
		t.Fatalf("profile %+v, %v", pr, err)
	}
}

// relayQuerier is a pool on url, closed with the test.
func relayQuerier(t *testing.T, url string) *nostrx.Pool {
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{url}})
	t.Cleanup(func() { pool.Close() })
	return pool
}
