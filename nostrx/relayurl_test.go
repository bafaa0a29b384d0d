package nostrx

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseRelayURL(t *testing.T) {
	good := map[string]string{
		"wss://relay.example":          "wss://relay.example",
		"WSS://Relay.Example/":         "wss://relay.example",
		"  wss://relay.example/nostr ": "wss://relay.example/nostr",
		"ws://127.0.0.1:7777":          "ws://127.0.0.1:7777",
		"ws://[::1]:7777/":             "ws://[::1]:7777",
		"wss://relay.example:443":      "wss://relay.example:443",
	}
	for in, want := range good {
		got, err := ParseRelayURL(in)
		if err != nil || got != want {
			t.Errorf("ParseRelayURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"https://relay.example":             "want ws:// or wss://",
		"relay.example":                     "want ws:// or wss://",
		"wss://":                            "no host",
		"wss://user:pw@relay.example":       "user info",
		"wss://relay.example/?token=x":      "query",
		"wss://relay.example/#frag":         "fragment",
		"wss://relay.example:0":             "port out of range",
		"wss://relay.example:70000":         "port out of range",
		"wss://relay.example:":              "port out of range",
		"wss://" + strings.Repeat("a", 600): "longer than",
		"wss://relay.example/\x00":          "does not parse",
	}
	for in, want := range bad {
		_, err := ParseRelayURL(in)
		if !errors.Is(err, ErrBadRelayURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRelayURL(%q) = %v; want an ErrBadRelayURL saying %q", in, err, want)
		}
	}
}

func TestRelayScope(t *testing.T) {
	cases := map[string]Scope{
		"wss://relay.example":       ScopePublic,
		"wss://8.8.8.8":             ScopePublic,
		"ws://127.0.0.1:7777":       ScopeLoopback,
		"ws://[::1]:7777":           ScopeLoopback,
		"ws://localhost:7777":       ScopeLoopback,
		"ws://relay.localhost":      ScopeLoopback,
		"ws://[::ffff:127.0.0.1]:1": ScopeLoopback,
		"wss://10.1.2.3":            ScopePrivate,
		"wss://192.168.1.1":         ScopePrivate,
		"wss://172.16.0.1":          ScopePrivate,
		"wss://100.64.0.1":          ScopePrivate,
		"wss://169.254.169.254":     ScopePrivate, // cloud metadata
		"wss://[fe80::1]":           ScopePrivate,
		"wss://[fd00::1]":           ScopePrivate,
		"wss://0.0.0.0":             ScopePrivate,
		"wss://relay":               ScopePrivate,
		"wss://nas.local":           ScopePrivate,
		"wss://relay.internal.":     ScopePrivate,
		"wss://router.home.arpa":    ScopePrivate,
	}
	for in, want := range cases {
		if got := RelayScope(in); got != want {
			t.Errorf("RelayScope(%q) = %v, want %v", in, got, want)
		}
	}
}

// FuzzParseRelayURL: whatever it is given, ParseRelayURL either refuses it
// with ErrBadRelayURL or returns a URL it accepts again unchanged, with a
// websocket scheme and no user info, query or fragment, and RelayScope never
// panics on it.
func FuzzParseRelayURL(f *testing.F) {
	for _, s := range []string{"wss://relay.example", "ws://127.0.0.1:7777/", "wss://[::1]:0", "wss://a@b", "ws://x/?y#z", "WSS://R.EXAMPLE:443/p/", "wss://%zz", "ws://[fe80::1%25eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseRelayURL(s)
		if err != nil {
			if !errors.Is(err, ErrBadRelayURL) {
				t.Fatalf("ParseRelayURL(%q): error %v does not wrap ErrBadRelayURL", s, err)
			}
			return
		}
		again, err := ParseRelayURL(u)
		if err != nil || again != u {
			t.Fatalf("ParseRelayURL(%q) = %q, which parses again as %q, %v", s, u, again, err)
		}
		if !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
			t.Fatalf("ParseRelayURL(%q) = %q: not a websocket URL", s, u)
		}
		if p, err := url.Parse(u); err != nil || p.User != nil || p.RawQuery != "" || p.Fragment != "" || p.Hostname() == "" {
			t.Fatalf("ParseRelayURL(%q) = %q: no host, or user info, a query or a fragment", s, u)
		}
		_ = RelayScope(u)
	})
}
