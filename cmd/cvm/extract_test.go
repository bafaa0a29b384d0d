package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// extractDoc is a CallToolResult as cvm prints it with --raw.
const extractDoc = `{"content":[{"type":"text","text":"first"},{"type":"text","text":"last\nline"}],` +
	`"structuredContent":{"sum":12345678901234567890,"a.b":{"c":[1,{"d":null}]},"x]y":"z","":"empty","q\"":true},"isError":false}`

func TestExtract_SelectsWhatThePathNames(t *testing.T) {
	for _, tc := range []struct {
		path, want, wantJSON string
	}{
		{"structuredContent.sum", "12345678901234567890\n", ""},
		{"content[0].text", "first\n", `"first"` + "\n"},
		{"content[-1].text", "last\nline\n", `"last\nline"` + "\n"},
		{"content[-2].type", "text\n", `"text"` + "\n"},
		{"content[1]", `{"type":"text","text":"last\nline"}` + "\n", ""},
		{`structuredContent["a.b"].c[1]`, `{"d":null}` + "\n", ""},
		{`structuredContent["a.b"].c[1].d`, "null\n", ""},
		{`structuredContent["x]y"]`, "z\n", `"z"` + "\n"},
		{`structuredContent[""]`, "empty\n", `"empty"` + "\n"},
		{`structuredContent["q\""]`, "true\n", ""},
		{`["structuredContent"]["a.b"]`, `{"c":[1,{"d":null}]}` + "\n", ""},
		{"isError", "false\n", ""},
	} {
		p, err := parsePath(tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		v, err := p.extract([]byte(extractDoc))
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if got, err := formatExtracted(v, false); err != nil || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.path, got, err, tc.want)
		}
		if tc.wantJSON == "" {
			tc.wantJSON = tc.want
		}
		if got, err := formatExtracted(v, true); err != nil || string(got) != tc.wantJSON {
			t.Errorf("%s as JSON: %q, %v; want %q", tc.path, got, err, tc.wantJSON)
		}
	}
}

func TestExtract_SaysWhereAPathLeavesTheResult(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"structuredContent.nope", `structuredContent has no nope (it has: sum, ["a.b"], ["x]y"], [""], ["q\""])`},
		{"nope", "the result has no nope (it has: content, structuredContent, isError)"},
		{"content[2]", "content has 2 element(s): [2] selects nothing"},
		{"content[-3]", "content has 2 element(s): [-3] selects nothing"},
		{"content.text", "content is an array, not an object: text selects nothing"},
		{"structuredContent[0]", "structuredContent is an object, not an array: [0] selects nothing"},
		{"content[0].text.more", "content[0].text is a string, not an object: more selects nothing"},
		{`structuredContent["a.b"].c[0][0]`, `structuredContent["a.b"].c[0] is a number, not an array: [0] selects nothing`},
	} {
		p, err := parsePath(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		_, err = p.extract([]byte(extractDoc))
		if !errors.As(err, new(noMatchError)) || err.Error() != tc.want {
			t.Errorf("%s: %v; want a noMatchError %q", tc.path, err, tc.want)
		}
	}
}

func TestParsePath_RefusesWhatIsNotAPath(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"", "an empty path"},
		{".sum", `at 1: want a name, .name, [index] or ["name"], not '.'`},
		{"a..b", "at 3: a name after the dot"},
		{"a.", "at 3: a name after the dot"},
		{"a[", "at 2: a [ without its ]"},
		{"a[x]", `at 2: [x]: want an index such as [0] or [-1], or a quoted name such as ["x"]`},
		{"a[01]", "[01]: want an index"},
		{"a[-0]", "[-0]: want an index"},
		{"a[+1]", "[+1]: want an index"},
		{"a[ 1]", "[ 1]: want an index"},
		{"a[]", "[]: want an index"},
		{"a[99999999999999999999]", "the index is too large"},
		{`a["b]`, "a quoted name without its closing quote"},
		{`a["b"`, "want ] after the quoted name"},
		{`a["\x"]`, `the quoted name "\x"`},
		{"a]b", `at 2: want a name, .name, [index] or ["name"], not ']'`},
		{`a"b`, `at 2: want a name`},
		{"a[0]b", `at 5: want a name, .name, [index] or ["name"], not 'b'`},
	} {
		_, err := parsePath(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error with %q", tc.path, err, tc.want)
		}
	}
}

// A path prints as it would be typed, and reads back as itself.
func TestParsePath_PrintsAsTyped(t *testing.T) {
	for _, s := range []string{"a", "content[0].text", "content[-1]", `x["a.b"][""].c`, `[0]`, `["q\""]`} {
		p, err := parsePath(s)
		if err != nil || p.String() != s {
			t.Errorf("%q: %q, %v", s, p.String(), err)
		}
	}
}

// FuzzParsePath: any string is a path or an error, never a panic; a path
// prints as a string that reads back as the same path, and selects in
// any JSON document without a panic.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"structuredContent.sum", "content[0].text", "content[-1].text", `a["b.c"][2]`, `["\u00e9\n"]`, "a[", `a["`, "[-0]", "a..b"} {
		f.Add(s, extractDoc)
	}
	f.Fuzz(func(t *testing.T, s, doc string) {
		p, err := parsePath(s)
		if err != nil {
			return
		}
		if len(p) == 0 {
			t.Fatalf("%q: an empty path without an error", s)
		}
		again, err := parsePath(p.String())
		if err != nil || again.String() != p.String() || len(again) != len(p) {
			t.Fatalf("%q prints as %q, which reads as %q, %v", s, p.String(), again.String(), err)
		}
		for i := range p {
			if p[i] != again[i] {
				t.Fatalf("%q: step %d reads back as %+v, not %+v", s, i, again[i], p[i])
			}
		}
		if !json.Valid([]byte(doc)) {
			return
		}
		v, err := p.extract([]byte(doc))
		if err != nil {
			if !errors.As(err, new(noMatchError)) {
				t.Fatalf("%q in %q: %v is no noMatchError", s, doc, err)
			}
			return
		}
		if !json.Valid(v) {
			t.Fatalf("%q in %q selects %q, no JSON value", s, doc, v)
		}
		if _, err := formatExtracted(v, false); err != nil {
			t.Fatalf("%q in %q: %v", s, doc, err)
		}
	})
}
