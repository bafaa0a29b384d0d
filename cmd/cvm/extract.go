package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// extractGrammar is the grammar of cvm call --extract, for its help.
const extractGrammar = `PATH is a name, [index] or ["name"],
then any number of .name, [index] and ["name"]:
  name      any characters but . [ ] and ": a member of an object
  [index]   an element of an array: 0 the first, -1 the last
  ["name"]  a JSON string, for names with . [ ] or " in them
as in structuredContent.sum, content[0].text, content[-1].text or
structuredContent["a.b"][0].`

// noMatchError is a path that selects nothing in a document, and where
// it left the document.
type noMatchError struct{ err error }

func (e noMatchError) Error() string { return e.err.Error() }
func (e noMatchError) Unwrap() error { return e.err }

// jsonPath is a parsed --extract PATH: the steps from the document's root.
type jsonPath []pathStep

// pathStep is one step of a path: a member's name, or an index when
// isIndex (negative: from the end).
type pathStep struct {
	name    string
	index   int
	isIndex bool
}

func (s pathStep) String() string {
	if s.isIndex {
		return "[" + strconv.Itoa(s.index) + "]"
	}
	if s.name == "" || strings.ContainsAny(s.name, `.[]"`) {
		q, _ := plainJSON(s.name)
		return "[" + string(q) + "]"
	}
	return "." + s.name
}

// label is the step as the first of a path: without the dot.
func (s pathStep) label() string { return strings.TrimPrefix(s.String(), ".") }

func (p jsonPath) String() string {
	var b strings.Builder
	for _, s := range p {
		b.WriteString(s.String())
	}
	return strings.TrimPrefix(b.String(), ".")
}

// parsePath reads an --extract PATH (extractGrammar).
func parsePath(s string) (jsonPath, error) {
	if s == "" {
		return nil, errors.New("an empty path; give one such as structuredContent.sum or content[0].text (--raw prints the whole result)")
	}
	var p jsonPath
	for i := 0; i < len(s); {
		switch {
		case s[i] == '[':
			step, n, err := bracketStep(s[i:])
			if err != nil {
				return nil, fmt.Errorf("at %d: %w", i+1, err)
			}
			p, i = append(p, step), i+n
		case s[i] == '.' && i > 0:
			n := nameLen(s[i+1:])
			if n == 0 {
				return nil, fmt.Errorf("at %d: a name after the dot (quote a name with [\"…\"])", i+2)
			}
			p, i = append(p, pathStep{name: s[i+1 : i+1+n]}), i+1+n
		case i == 0 && nameLen(s) > 0:
			n := nameLen(s)
			p, i = append(p, pathStep{name: s[:n]}), n
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, fmt.Errorf("at %d: want a name, .name, [index] or [\"name\"], not %q", i+1, r)
		}
	}
	return p, nil
}

// nameLen is the length of the bare name s starts with.
func nameLen(s string) int {
	if i := strings.IndexAny(s, `.[]"`); i >= 0 {
		return i
	}
	return len(s)
}

// bracketStep reads the [index] or ["name"] s starts with, and its length.
func bracketStep(s string) (pathStep, int, error) {
	end := strings.IndexByte(s, ']')
	if len(s) > 1 && s[1] == '"' {
		// A JSON string may hold ]: its end is the first ] after the
		// closing quote.
		q, err := quotedLen(s[1:])
		if err != nil {
			return pathStep{}, 0, err
		}
		if len(s) <= 1+q || s[1+q] != ']' {
			return pathStep{}, 0, errors.New(`want ] after the quoted name`)
		}
		var name string
		if err := json.Unmarshal([]byte(s[1:1+q]), &name); err != nil {
			return pathStep{}, 0, fmt.Errorf("the quoted name %s: %w", s[1:1+q], err)
		}
		return pathStep{name: name}, q + 2, nil
	}
	if end < 0 {
		return pathStep{}, 0, errors.New("a [ without its ]")
	}
	index, err := parseIndex(s[1:end])
	if err != nil {
		return pathStep{}, 0, err
	}
	return pathStep{index: index, isIndex: true}, end + 1, nil
}

// quotedLen is the length of the JSON string s starts with, quotes
// included; its escapes are checked by json.Unmarshal.
func quotedLen(s string) (int, error) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errors.New("a quoted name without its closing quote")
}

// parseIndex reads an array index: a decimal number without leading
// zeros or +, negative to count from the end.
func parseIndex(s string) (int, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" || (len(digits) > 1 && digits[0] == '0') || s == "-0" {
		return 0, fmt.Errorf("[%s]: want an index such as [0] or [-1], or a quoted name such as [\"%s\"]", s, s)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("[%s]: the index is too large", s)
	}
	return n, nil
}

// extract returns the JSON value p selects in doc, as doc has it; a
// noMatchError says where the path left the document.
func (p jsonPath) extract(doc []byte) (json.RawMessage, error) {
	v := json.RawMessage(bytes.TrimSpace(doc))
	for i, step := range p {
		next, err := step.in(v)
		if err != nil {
			at := "the result"
			if i > 0 {
				at = jsonPath(p[:i]).String()
			}
			return nil, noMatchError{fmt.Errorf("%s %w", at, err)}
		}
		v = next
	}
	return v, nil
}

// in takes the step in the value v.
func (s pathStep) in(v json.RawMessage) (json.RawMessage, error) {
	kind := jsonKind(v)
	if s.isIndex {
		var elems []json.RawMessage
		if kind != "an array" || json.Unmarshal(v, &elems) != nil {
			return nil, fmt.Errorf("is %s, not an array: [%d] selects nothing", kind, s.index)
		}
		i := s.index
		if i < 0 {
			i += len(elems)
		}
		if i < 0 || i >= len(elems) {
			return nil, fmt.Errorf("has %d element(s): [%d] selects nothing", len(elems), s.index)
		}
		return elems[i], nil
	}
	var members map[string]json.RawMessage
	if kind != "an object" || json.Unmarshal(v, &members) != nil {
		return nil, fmt.Errorf("is %s, not an object: %s selects nothing", kind, s.label())
	}
	m, ok := members[s.name]
	if !ok {
		return nil, fmt.Errorf("has no %s (it has: %s)", s.label(), memberNames(v))
	}
	return m, nil
}

// jsonKind names the kind of JSON value v is.
func jsonKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// memberNames lists an object's member names in their order.
func memberNames(v json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(v))
	if _, err := dec.Token(); err != nil {
		return "nothing"
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := tok.(string)
		names = append(names, pathStep{name: name}.label())
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	if len(names) == 0 {
		return "no members"
	}
	return strings.Join(names, ", ")
}

// formatExtracted is how --extract prints a value: a string as it is
// (asJSON false), anything else as compact JSON, and a newline.
func formatExtracted(v json.RawMessage, asJSON bool) ([]byte, error) {
	if !asJSON && jsonKind(v) == "a string" {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		return append([]byte(s), '\n'), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
