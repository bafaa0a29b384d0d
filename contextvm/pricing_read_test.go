package contextvm

import (
	"errors"
	"testing"

	"fiatjaf.com/nostr"
)

func TestReadCapTag(t *testing.T) {
	for _, tc := range []struct {
		tag     nostr.Tag
		list    string
		want    Price
		bad     bool // ErrBadPrice
		bareOut bool // ErrBareCapability
	}{
		{nostr.Tag{"cap", "get_weather", "100", "sats"}, "tool", Price{"tool:get_weather", "100", "sats"}, false, false},
		{nostr.Tag{"cap", "tool:get_weather", "100"}, "", Price{"tool:get_weather", "100", "sats"}, false, false},
		{nostr.Tag{"cap", "file:///a.txt", "2", "usd"}, "resource", Price{"resource:file:///a.txt", "2", "usd"}, false, false},
		{nostr.Tag{"cap", "brief", "1-3"}, "prompt", Price{"prompt:brief", "1-3", "sats"}, false, false},
		{nostr.Tag{"cap", "get_weather"}, "tool", Price{"tool:get_weather", "", "sats"}, true, false},
		{nostr.Tag{"cap", "get_weather", "lots"}, "tool", Price{"tool:get_weather", "lots", "sats"}, true, false},
		{nostr.Tag{"cap", "get_weather", "1"}, "", Price{}, false, true},
		{nostr.Tag{"cap"}, "tool", Price{}, true, false},
		{nostr.Tag{"cap", ""}, "tool", Price{}, true, false},
	} {
		got, err := ReadCapTag(tc.tag, tc.list)
		if got != tc.want || errors.Is(err, ErrBadPrice) != tc.bad || errors.Is(err, ErrBareCapability) != tc.bareOut {
			t.Errorf("ReadCapTag(%q, %q) = %+v, %v", []string(tc.tag), tc.list, got, err)
		}
	}
}

// A client learns prices from the cap tags on the server's list answers,
// bare names by the list, and keeps a readable price over an unreadable
// one.
func TestServerView_LearnsPricesFromListAnswers(t *testing.T) {
	var v serverView
	v.learnPrices(nostr.Tags{{"cap", "add", "5"}, {"cap", "tool:mul", "x"}, {"p", "abc"}}, "tool")
	v.learnPrices(nostr.Tags{{"cap", "brief", "2", "usd"}}, "prompt")
	v.learnPrices(nostr.Tags{{"cap", "add", "?"}}, "tool")
	got := v.knownPrices()
	want := []Price{{"prompt:brief", "2", "usd"}, {"tool:add", "5", "sats"}, {"tool:mul", "x", "sats"}}
	if len(got) != len(want) {
		t.Fatalf("prices %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("price %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got[2].Validate() == nil {
		t.Error("an unreadable amount validates")
	}
}

func FuzzReadCapTag(f *testing.F) {
	f.Add("get_weather", "100", "sats", "tool")
	f.Add("tool:a", "1-2", "", "")
	f.Add("file:///x", "0.5", "usd", "resource")
	f.Add("b", "9-1", "sats", "prompt")
	f.Fuzz(func(t *testing.T, capability, amount, unit, list string) {
		p, err := ReadCapTag(nostr.Tag{"cap", capability, amount, unit}, list)
		if err != nil {
			return
		}
		if p.Validate() != nil || !HasPrefix(p.Capability) {
			t.Fatalf("accepted %+v", p)
		}
		if lo, hi, err := p.Range(); err != nil || lo < 0 || hi < lo || hi > maxAmount || int64(hi) < 0 {
			t.Fatalf("accepted %+v: range %g-%g, %v", p, lo, hi, err)
		}
	})
}
