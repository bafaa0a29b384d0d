package usdrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// ErrBadAnswer is wrapped by every error about what a rate source
// answered: not JSON, nothing where the pointer points, or not a price.
var ErrBadAnswer = errors.New("usdrate: the rate source's answer holds no usable price")

// ErrBadPointer: a JSON pointer that is not RFC 6901's form.
var ErrBadPointer = errors.New("usdrate: not a JSON pointer (RFC 6901), e.g. /data/amount")

// maxUSDPerBTC bounds a price read: more than a billion dollars a bitcoin
// is no rate but a source gone wrong (or answering in cents).
const maxUSDPerBTC = 1_000_000_000

// minUSDPerBTC bounds a price read from below: less than a dollar a
// bitcoin is a source gone wrong (or answering in another unit), and
// would turn a cent into a million sats.
const minUSDPerBTC = 1

// maxPriceLen bounds the text of a price: "97123.45" is eight bytes.
const maxPriceLen = 64

// maxPointerLen bounds a pointer; an operator's is a few segments long.
const maxPointerLen = 1024

// pointer is a parsed JSON pointer: its reference tokens, unescaped.
type pointer []string

// parsePointer reads an RFC 6901 JSON pointer: "" (the whole document) or
// "/" followed by tokens separated by "/", in which "~1" is "/" and "~0"
// is "~", and "~" followed by anything else is malformed.
func parsePointer(s string) (pointer, error) {
	if s == "" {
		return pointer{}, nil
	}
	if len(s) > maxPointerLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadPointer, maxPointerLen)
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("%w: %q does not start with /", ErrBadPointer, s)
	}
	var p pointer
	for _, tok := range strings.Split(s[1:], "/") {
		for i := 0; i < len(tok); i++ {
			if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
				return nil, fmt.Errorf("%w: %q has a ~ that is not ~0 or ~1", ErrBadPointer, s)
			}
		}
		p = append(p, strings.NewReplacer("~1", "/", "~0", "~").Replace(tok))
	}
	return p, nil
}

// at names where p points, for an error message.
func (p pointer) at() string {
	if len(p) == 0 {
		return "the answer"
	}
	return strconv.Quote(p.String())
}

// String is the pointer as RFC 6901 writes it.
func (p pointer) String() string {
	var b strings.Builder
	for _, tok := range p {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

// parseRate reads the price p points at in body, a JSON document: a
// number, or a string holding a plain decimal one (sources such as
// Coinbase's send "97000.12"), above zero and at most maxUSDPerBTC.
func parseRate(body []byte, p pointer) (*big.Rat, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrBadAnswer, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrBadAnswer)
	}
	for i, tok := range p {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return nil, fmt.Errorf("%w: no member %q at %s", ErrBadAnswer, clip(tok), p[:i].at())
			}
			v = next
		case []any:
			n, err := arrayIndex(tok)
			if err != nil || n >= len(node) {
				return nil, fmt.Errorf("%w: no element %q in the array at %s", ErrBadAnswer, clip(tok), p[:i].at())
			}
			v = node[n]
		default:
			return nil, fmt.Errorf("%w: %s is neither an object nor an array", ErrBadAnswer, p[:i].at())
		}
	}
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = strings.TrimSpace(x)
	default:
		return nil, fmt.Errorf("%w: %s is %s, not a number", ErrBadAnswer, p.at(), kindOf(v))
	}
	return readPrice(text, p)
}

// readPrice reads text, found at p, as a price in dollars: a decimal
// number, with an exponent at most, as JSON writes numbers.
func readPrice(text string, p pointer) (*big.Rat, error) {
	// Checked as a float64 first: big.Rat alone would read fractions
	// ("1/3"), and an exponent of a billion would have it build a number
	// of a billion digits. Within the bounds, text is short and its
	// exponent small.
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || len(text) > maxPriceLen || strings.ContainsAny(text, "xXpP_iInN") {
		return nil, fmt.Errorf("%w: %s is %q, not a decimal number", ErrBadAnswer, p.at(), clip(text))
	}
	if f < minUSDPerBTC || f > maxUSDPerBTC {
		return nil, fmt.Errorf("%w: %s is %s, not between %d and %d usd a bitcoin: not a price in dollars", ErrBadAnswer, p.at(), clip(text), minUSDPerBTC, maxUSDPerBTC)
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return nil, fmt.Errorf("%w: %s is %q, not a decimal number", ErrBadAnswer, p.at(), clip(text))
	}
	return r, nil
}

// arrayIndex reads an array index token: digits, without leading zeros.
func arrayIndex(tok string) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, errors.New("not an index")
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, errors.New("not an index")
		}
	}
	return strconv.Atoi(tok)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "something else"
}

// clip bounds text taken from a source's answer before it is shown.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
