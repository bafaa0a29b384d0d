package social

import (
	"errors"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
)

func TestProfile_RoundTripsThroughItsEvent(t *testing.T) {
	p := Profile{Name: "n", About: "<b>a</b>", Picture: "https://p", Website: "https://w", NIP05: "n@example.com", LUD16: "n@example.com"}
	got, err := ParseProfile(p.Event())
	if err != nil {
		t.Fatal(err)
	}
	if got != p {
		t.Fatalf("read %+v, want %+v", got, p)
	}
}

func TestParseProfile_RefusesBadContent(t *testing.T) {
	tests := []struct {
		name string
		ev   nostr.Event
		want error
	}{
		{"note", nostr.Event{Kind: 1, Content: `{}`}, ErrWrongKind},
		{"oversized", nostr.Event{Content: `{"about":"` + strings.Repeat("x", MaxProfileContent) + `"}`}, ErrTooLarge},
		{"array", nostr.Event{Content: `["name"]`}, ErrMalformed},
		{"null", nostr.Event{Content: `null`}, ErrMalformed},
		{"truncated", nostr.Event{Content: `{"name":"x"`}, ErrMalformed},
		{"number name", nostr.Event{Content: `{"name":5}`}, ErrMalformed},
		{"object about", nostr.Event{Content: `{"about":{"x":1}}`}, ErrMalformed},
		{"not UTF-8", nostr.Event{Content: "{\"name\":\"\xff\"}"}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseProfile(tt.ev); !errors.Is(err, tt.want) {
				t.Fatalf("ParseProfile = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseProfile_IgnoresUnknownFieldsAndNulls(t *testing.T) {
	p, err := ParseProfile(nostr.Event{Content: `{"name":"x","lud16":null,"bot":true,"displayName":7}`})
	if err != nil || p != (Profile{Name: "x"}) {
		t.Fatalf("ParseProfile = %+v, %v", p, err)
	}
}

func TestParseNote_Bounds(t *testing.T) {
	if _, err := ParseNote(nostr.Event{Kind: 1, Content: strings.Repeat("x", MaxNoteContent+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized note: %v", err)
	}
	if _, err := ParseNote(nostr.Event{Kind: 0}); !errors.Is(err, ErrWrongKind) {
		t.Errorf("kind 0 as a note: %v", err)
	}
	if n, err := ParseNote(nostr.Event{Kind: 1, Content: "hi"}); err != nil || n.Content != "hi" {
		t.Errorf("note: %+v, %v", n, err)
	}
}

func FuzzParseProfile(f *testing.F) {
	f.Add(Profile{Name: "n", About: "a"}.Event().Content)
	f.Add(`{"name":null,"about":1}`)
	f.Fuzz(func(t *testing.T, content string) {
		p, err := ParseProfile(nostr.Event{Content: content})
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		again, err := ParseProfile(p.Event())
		if err != nil || again != p {
			t.Fatalf("%+v does not round-trip: %+v, %v", p, again, err)
		}
	})
}
