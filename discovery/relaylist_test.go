package discovery_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
)

func rTags(entries ...[]string) nostr.Tags {
	tags := make(nostr.Tags, len(entries))
	for i, e := range entries {
		tags[i] = append(nostr.Tag{"r"}, e...)
	}
	return tags
}

func TestReadRelayList_Policy(t *testing.T) {
	const public, loopback, private = "wss://discovery.example", "ws://127.0.0.1:7777", "wss://10.0.0.2"
	for _, tc := range []struct {
		name string
		tags nostr.Tags
		from []string
		want []string
		why  string // a reason among the ignored, "" for none
	}{
		{"wss on a public relay", rTags([]string{"wss://a.example/"}, []string{"wss://b.example", "write"}), []string{public}, []string{"wss://a.example", "wss://b.example"}, ""},
		{"unmarked first, repeats once", rTags([]string{"wss://b.example", "read"}, []string{"wss://a.example"}, []string{"WSS://A.example"}), []string{public}, []string{"wss://a.example", "wss://b.example"}, ""},
		{"ws:// to a public host", rTags([]string{"ws://a.example"}), []string{public}, nil, "ws:// (unencrypted)"},
		{"other schemes", rTags([]string{"https://a.example"}, []string{"file:///etc/passwd"}), []string{public}, nil, "want ws:// or wss://"},
		{"loopback from a public relay", rTags([]string{"ws://127.0.0.1:7777"}, []string{"wss://localhost"}), []string{public}, nil, "loopback address on a list read from a public relay"},
		{"private from a public relay", rTags([]string{"wss://192.168.1.10"}, []string{"wss://169.254.169.254"}, []string{"wss://relay"}), []string{public}, nil, "private address on a list read from a public relay"},
		{"one public discovery relay is enough to be strict", rTags([]string{"ws://127.0.0.1:1"}), []string{loopback, public}, nil, "loopback address"},
		{"loopback from a loopback relay", rTags([]string{"ws://127.0.0.1:1"}, []string{"ws://[::1]:2"}), []string{loopback}, []string{"ws://127.0.0.1:1", "ws://[::1]:2"}, ""},
		{"private from a private relay", rTags([]string{"wss://10.0.0.3"}), []string{private}, []string{"wss://10.0.0.3"}, ""},
		{"loopback from a private relay", rTags([]string{"ws://127.0.0.1:1"}), []string{private}, nil, "loopback address on a list read from a private relay"},
		{"unknown marker", rTags([]string{"wss://a.example", "both"}), []string{public}, nil, `unknown marker "both"`},
		{"no URL", nostr.Tags{{"r"}}, []string{public}, nil, "no URL"},
		{"other tags", nostr.Tags{{"p", "wss://a.example"}, {"relay", "wss://b.example"}}, []string{public}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := discovery.ReadRelayList(tc.tags, tc.from)
			if !slices.Equal(l.Relays, tc.want) {
				t.Errorf("relays %q, want %q (ignored: %+v)", l.Relays, tc.want, l.Ignored)
			}
			reasons := fmt.Sprint(l.Ignored)
			if tc.why != "" && !strings.Contains(reasons, tc.why) {
				t.Errorf("ignored %s; want a reason saying %q", reasons, tc.why)
			}
			if tc.why == "" && l.Dropped != 0 {
				t.Errorf("ignored %s; want nothing ignored", reasons)
			}
		})
	}
}

func TestReadRelayList_Bounds(t *testing.T) {
	var tags nostr.Tags
	for i := range 50 {
		tags = append(tags, nostr.Tag{"r", fmt.Sprintf("wss://r%d.example", i)})
	}
	for range 20 {
		tags = append(tags, nostr.Tag{"r", "http://bad.example"})
	}
	l := discovery.ReadRelayList(tags, []string{"wss://discovery.example"})
	if len(l.Relays) != discovery.MaxListedRelays || l.Relays[0] != "wss://r0.example" || l.Trimmed != 50-discovery.MaxListedRelays {
		t.Errorf("kept %d relays starting with %q, trimmed %d; want the first %d", len(l.Relays), l.Relays[0], l.Trimmed, discovery.MaxListedRelays)
	}
	if l.Dropped != 20 || len(l.Ignored) > 8 {
		t.Errorf("dropped %d with %d described; want 20, at most 8 described", l.Dropped, len(l.Ignored))
	}
}

// FuzzReadRelayList: whatever a relay list holds, what a client is told to
// dial is at most MaxListedRelays URLs that ParseRelayURL accepts as they
// are, without repeats, wss:// unless on loopback, and nothing closer to
// this machine than the relays the list was read from allow.
func FuzzReadRelayList(f *testing.F) {
	f.Add("wss://a.example", "", "ws://127.0.0.1:1", "read", "wss://discovery.example")
	f.Add("ws://[::1]:7", "write", "wss://10.1.1.1", "x", "ws://127.0.0.1:7777")
	f.Add("wss://relay", "", "wss://RELAY.example/", "", "wss://192.168.0.1")
	f.Fuzz(func(t *testing.T, u1, m1, u2, m2, from string) {
		tags := nostr.Tags{{"r", u1, m1}, {"r", u2}, {"r", u2, m2}, {"r"}, {"r", u1}}
		origin := []string{from}
		l := discovery.ReadRelayList(tags, origin)
		if len(l.Relays) > discovery.MaxListedRelays {
			t.Fatalf("%d relays", len(l.Relays))
		}
		originScope := nostrx.ScopeLoopback
		if len(origin) > 0 {
			originScope = min(originScope, nostrx.RelayScope(from))
		}
		for i, r := range l.Relays {
			if p, err := nostrx.ParseRelayURL(r); err != nil || p != r {
				t.Fatalf("relay %q: parses as %q, %v", r, p, err)
			}
			if slices.Contains(l.Relays[:i], r) {
				t.Fatalf("relay %q twice", r)
			}
			scope := nostrx.RelayScope(r)
			if strings.HasPrefix(r, "ws://") && scope != nostrx.ScopeLoopback {
				t.Fatalf("relay %q: ws:// off loopback", r)
			}
			if scope > originScope {
				t.Fatalf("relay %q (%v) on a list read from %q (%v)", r, scope, from, originScope)
			}
		}
	})
}
