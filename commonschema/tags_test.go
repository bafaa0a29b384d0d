package commonschema

import (
	"reflect"
	"testing"

	"fiatjaf.com/nostr"
)

func TestTags(t *testing.T) {
	tools := []ToolHash{{Name: "translate_text", Hash: "aa"}, {Name: "get_weather", Hash: "bb"}}
	got := Tags(tools, []string{" weather ", "weather", "", " \t", "translation", "\ufefftranslation", "\u0085nel", "Weather"})
	want := nostr.Tags{
		{"i", "aa", "translate_text"},
		{"i", "bb", "get_weather"},
		{"k", "io.contextvm/common-schema"},
		{"t", "weather"},
		{"t", "translation"},
		{"t", "\u0085nel"}, // JavaScript's trim keeps U+0085, as the reference does
		{"t", "Weather"},   // categories are case-sensitive, as in the reference
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// Categories describe common tools; without any there is nothing to tag.
func TestTags_NoToolsNoTags(t *testing.T) {
	if got := Tags(nil, []string{"weather"}); got != nil {
		t.Errorf("got %q, want no tags", got)
	}
}

func TestTags_OneKTagWithoutCategories(t *testing.T) {
	got := Tags([]ToolHash{{Name: "a", Hash: "1"}}, nil)
	want := nostr.Tags{{"i", "1", "a"}, {"k", Namespace}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
