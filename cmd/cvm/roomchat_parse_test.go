package main

import (
	"strings"
	"testing"
)

func TestParseChatLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want chatCommand
		err  string
	}{
		{"", chatCommand{}, ""},
		{"   ", chatCommand{}, ""},
		{"hello there", chatCommand{name: "say", text: "hello there"}, ""},
		{"//tools is a word", chatCommand{name: "say", text: "/tools is a word"}, ""},
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
		if err != nil || got.name != tc.want.name || got.text != tc.want.text || got.peer != tc.want.peer ||
			got.tool != tc.want.tool || string(got.args) != string(tc.want.args) || got.n != tc.want.n {
			t.Errorf("%q: %+v %v, want %+v", tc.line, got, err, tc.want)
		}
	}
}

// FuzzParseChatLine: whatever a person or a program types, the parser
// returns a command or an error, and /call arguments are a JSON object.
func FuzzParseChatLine(f *testing.F) {
	for _, s := range []string{"hi", "/call a b {\"x\":1}", "/history 3", "//x", "/tools p", "/call a b"} {
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
		if c.name == "history" && (c.n < 1 || c.n > 1000) {
			t.Fatalf("%q: history %d", line, c.n)
		}
	})
}
