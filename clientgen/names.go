package clientgen

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxWord bounds the part of an identifier one name contributes.
const maxWord = 48

// pascal makes an identifier hint of name: its ASCII letters and digits,
// each run starting with a capital ("word_count" → "WordCount"). What has
// none of those is fallback; a leading digit gets an "N" before it.
// Identifiers are ASCII so that Go's and JavaScript's rules, which differ
// on which Unicode letters may start a name or be exported, agree.
func pascal(name, fallback string) string {
	var b strings.Builder
	upper := true
	for _, r := range name {
		switch {
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if upper {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
			upper = false
		default:
			upper = true
		}
		if b.Len() >= maxWord {
			break
		}
	}
	out := b.String()
	switch {
	case out == "":
		return fallback
	case out[0] >= '0' && out[0] <= '9':
		return "N" + out
	}
	return out
}

// camel is pascal with a lower-case first letter ("WordCount" →
// "wordCount").
func camel(name, fallback string) string {
	p := pascal(name, fallback)
	return strings.ToLower(p[:1]) + p[1:]
}

// namer hands out identifiers unique in one scope: a name taken (or
// reserved) gets the first free numeric suffix.
type namer struct {
	taken map[string]bool
	// next is the suffix to try first for a hint: thousands of names that
	// collide cost no more than thousands that do not.
	next map[string]int
}

func newNamer(reserved ...string) *namer {
	n := &namer{taken: map[string]bool{}, next: map[string]int{}}
	for _, r := range reserved {
		n.taken[r] = true
	}
	return n
}

func (n *namer) name(hint string) string {
	name := hint
	i := max(n.next[hint], 2)
	for ; n.taken[name]; i++ {
		name = hint + strconv.Itoa(i)
	}
	n.next[hint] = i
	n.taken[name] = true
	return name
}

// commentText makes s safe inside a line comment in Go and TypeScript:
// no line ends (JavaScript ends lines at U+2028 and U+2029 too), no
// control characters, no byte-order mark (Go refuses one after the start),
// no bidirectional overrides (which make code read otherwise than it
// compiles), valid UTF-8. What is replaced is written as \uXXXX.
func commentText(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteString(`\uFFFD`)
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r), unsafeRune(r):
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unsafeRune reports the characters that change how code reads without
// being seen, or end a line only in some languages: the byte-order mark,
// JavaScript's line separators, bidirectional controls.
func unsafeRune(r rune) bool {
	switch {
	case r == 0xFEFF, r == 0x2028, r == 0x2029, r == 0x200E, r == 0x200F, r == 0x061C:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// commentLines splits a description into safe comment lines.
func commentLines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(commentText(l), " ")
	}
	return lines
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
