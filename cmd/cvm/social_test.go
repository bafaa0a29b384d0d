package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
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
// fetcher reaches it.
func nip05Host(t *testing.T, c *cli, names map[string]string) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"names": names})
	}))
	t.Cleanup(srv.Close)
	c.fetcher = outboundtest.Allowing(srv)
	return strings.TrimPrefix(srv.URL, "https://")
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
