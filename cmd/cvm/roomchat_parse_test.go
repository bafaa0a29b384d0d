package main

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestParseChatLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want chatCommand
		err  string
	}{
		{"", chatCommand{}, ""},
		{"   ", chatCommand{}, ""},
		{"hello there", chatCommand{name: "say", text: "hello there", format: "plain"}, ""},
		{"//tools is a word", chatCommand{name: "say", text: "/tools is a word", format: "plain"}, ""},
		{"/md **a**  b ", chatCommand{name: "say", text: "**a**  b ", format: "markdown"}, ""},
		{"/md\t# x", chatCommand{name: "say", text: "# x", format: "markdown"}, ""},
		{"/md", chatCommand{}, "usage: /md TEXT"},
		{"/md   ", chatCommand{}, "usage: /md TEXT"},
		{"/who", chatCommand{name: "who"}, ""},
		{"/quit", chatCommand{name: "quit"}, ""},
		{"/tools alpha", chatCommand{name: "tools", peer: "alpha"}, ""},
		{"/history", chatCommand{name: "history", n: 20}, ""},
		{"/history 5", chatCommand{name: "history", n: 5}, ""},
		{`/call alpha echo {"message": "a b  c"}`, chatCommand{name: "call", peer: "alpha", tool: "echo", args: []byte(`{"message": "a b  c"}`)}, ""},
		{"/call alpha get-sum", chatCommand{name: "call", peer: "alpha", tool: "get-sum", args: []byte("{}")}, ""},
		{"/call echo echo {}", chatCommand{name: "call", peer: "echo", tool: "echo", args: []byte("{}")}, ""},
		{"/tools", chatCommand{}, "usage: /tools PEER"},
		{"/call alpha", chatCommand{}, "usage: /call"},
		{"/call alpha echo [1]", chatCommand{}, "must be a JSON object"},
		{"/history 0", chatCommand{}, "usage: /history"},
		{"/who me", chatCommand{}, "takes no arguments"},
		{"/dance", chatCommand{}, "unknown command /dance"},
	} {
		got, err := parseChatLine(tc.line)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || got.name != tc.want.name || got.text != tc.want.text || got.format != tc.want.format || got.peer != tc.want.peer ||
			got.tool != tc.want.tool || string(got.args) != string(tc.want.args) || got.n != tc.want.n {
			t.Errorf("%q: %+v %v, want %+v", tc.line, got, err, tc.want)
		}
	}
}

// FuzzParseChatLine: whatever a person or a program types, the parser
// returns a command or an error, and /call arguments are a JSON object.
func FuzzParseChatLine(f *testing.F) {
	for _, s := range []string{"hi", "/md # x", "/call a b {\"x\":1}", "/history 3", "//x", "/tools p", "/call a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := parseChatLine(line)
		if err != nil {
			return
		}
		if c.name == "call" && (len(c.args) == 0 || c.args[0] != '{') {
			t.Fatalf("%q: call arguments %q", line, c.args)
		}
		if c.name == "say" && (c.text == "" || (c.format != "plain" && c.format != "markdown")) {
			t.Fatalf("%q: say %+v", line, c)
		}
		if c.name == "history" && (c.n < 1 || c.n > 1000) {
			t.Fatalf("%q: history %d", line, c.n)
		}
	})
}

func TestTermText(t *testing.T) {
	for _, tc := range []struct{ in, indent, want string }{
		{"plain", "  ", "plain"},
		{"a\nb\r\nc", "  ", "a\n  b\n  c"},
		{"\x1b[31mred\x07", "", `\x1b[31mred\x07`},
		{"over\rwrite", "", `over\x0dwrite`},
		{"tab\tok", "", "tab\tok"},
		{"\u202eevil\u0085", "", `\u202eevil\u0085`},
		{"bad \xff utf-8", "", `bad \xff utf-8`},
		{"ünïcode ✓", "", "ünïcode ✓"},
	} {
		if got := termText(tc.in, tc.indent); got != tc.want {
			t.Errorf("termText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := termField("a\nb"); got != `a\nb` {
		t.Errorf("termField = %q", got)
	}
}

// FuzzTermText: whatever a peer sends, what reaches the terminal is valid
// UTF-8 with no control character but newline and tab, no bidirectional
// override, and every line after the first indented.
func FuzzTermText(f *testing.F) {
	for _, s := range []string{"hi", "a\nb", "\x1b[2J", "\r\n", "\u202e", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := termText(s, "  ")
		if !utf8.ValidString(out) {
			t.Fatalf("%q: invalid UTF-8 %q", s, out)
		}
		for i, line := range strings.Split(out, "\n") {
			if i > 0 && !strings.HasPrefix(line, "  ") {
				t.Fatalf("%q: line %d %q not indented", s, i, line)
			}
			for _, r := range line {
				if (unicode.IsControl(r) && r != '\t') || unicode.Is(unicode.Bidi_Control, r) {
					t.Fatalf("%q: %U reaches the terminal in %q", s, r, out)
				}
			}
		}
		if f := termField(s); strings.Contains(f, "\n") {
			t.Fatalf("%q: termField kept a newline: %q", s, f)
		}
	})
}
