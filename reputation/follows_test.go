package reputation_test

import (
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/reputation"
)

func followList(t testing.TB, sk nostr.SecretKey, at nostr.Timestamp, follows ...nostr.PubKey) nostr.Event {
	t.Helper()
	tags := make(nostr.Tags, len(follows))
	for i, pk := range follows {
		tags[i] = nostr.Tag{"p", pk.Hex()}
	}
	evt := nostr.Event{Kind: nostr.KindFollowList, CreatedAt: at, Tags: tags}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

func TestParseFollowList(t *testing.T) {
	a, b := nostr.Generate().Public(), nostr.Generate().Public()
	evt := nostr.Event{Kind: nostr.KindFollowList, Content: `{"wss://r":{}}`, Tags: nostr.Tags{
		{"p", a.Hex(), "wss://relay", "alice"},
		{"p", "not a key"},
		{"p"},
		{"e", b.Hex()},
		{"p", a.Hex()}, // again
		{"p", b.Hex()},
	}}
	fl, err := reputation.ParseFollowList(evt)
	if err != nil || len(fl.Follows) != 2 || fl.Follows[0] != a || fl.Follows[1] != b || fl.Invalid != 1 || fl.Truncated {
		t.Fatalf("got %+v, %v; want a, b, one invalid", fl, err)
	}
	if _, err := reputation.ParseFollowList(nostr.Event{Kind: 1}); err == nil || !strings.Contains(err.Error(), "kind 1") {
		t.Fatalf("kind 1: %v", err)
	}
}

// A follow list of 100,000 keys is read up to MaxFollowsPerList, and says
// it was cut.
func TestParseFollowList_Huge(t *testing.T) {
	tags := make(nostr.Tags, 100_000)
	for i := range tags {
		var pk nostr.PubKey
		pk[0], pk[1], pk[2] = byte(i), byte(i>>8), byte(i>>16)
		tags[i] = nostr.Tag{"p", pk.Hex()}
	}
	fl, err := reputation.ParseFollowList(nostr.Event{Kind: nostr.KindFollowList, Tags: tags})
	if err != nil || len(fl.Follows) != reputation.MaxFollowsPerList || !fl.Truncated {
		t.Fatalf("%d follows, truncated %v, %v", len(fl.Follows), fl.Truncated, err)
	}
}

func FuzzParseFollowList(f *testing.F) {
	f.Add(uint16(3), "p", "0000000000000000000000000000000000000000000000000000000000000001", "wss://r")
	f.Add(uint16(3), "p", "zz", "")
	f.Add(uint16(1), "e", "", "")
	f.Fuzz(func(t *testing.T, kind uint16, name, value, extra string) {
		evt := nostr.Event{Kind: nostr.Kind(kind), Tags: nostr.Tags{{name, value, extra}, {name}, {"p", value}, {name, value}}}
		fl, err := reputation.ParseFollowList(evt)
		if kind != 3 {
			if err == nil {
				t.Fatalf("kind %d accepted", kind)
			}
			return
		}
		if err != nil || len(fl.Follows) > 1 || fl.Truncated {
			t.Fatalf("%+v, %v", fl, err)
		}
		for _, pk := range fl.Follows {
			if pk.Hex() != strings.ToLower(value) {
				t.Fatalf("follows %s from %q", pk.Hex(), value)
			}
		}
	})
}
