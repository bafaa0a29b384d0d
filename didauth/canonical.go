package didauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 (JCS) form of a JSON object: what strict
// mode signs after the separator.
func Canonical(signedData []byte) ([]byte, error) {
	b, err := jcs.Transform(signedData)
	if err != nil {
		return nil, fmt.Errorf("canonicalize signed_data: %w", err)
	}
	return b, nil
}

// maxKitDepth bounds the nesting KitCanonical follows, as JSON.stringify's
// recursion is bounded by the JavaScript stack.
const maxKitDepth = 64

// KitCanonical returns signed_data as @nuwa-ai/identity-kit 0.6.0
// canonicalizes it, byte for byte: JSON.stringify(o, Object.keys(o).sort()).
// The array replacer is a property allow-list applied at every depth, so
// top-level keys come out sorted (by UTF-16 code units) and every nested
// object keeps only the properties whose names are also top-level keys, in
// the sorted order: {"params":{"tool":"x"}} signs as {"params":{}}. This
// is the kit's weakness that compatibility mode inherits, reproduced
// exactly so that its signatures verify.
//
// One difference is left: a lone UTF-16 surrogate escaped in the input
// (\ud800) is read as U+FFFD here, where the kit keeps and re-escapes it.
func KitCanonical(signedData []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(signedData))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonicalize signed_data: %w", err)
	}
	if dec.More() {
		return nil, errors.New("canonicalize signed_data: trailing data")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("canonicalize signed_data: not a JSON object")
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	var buf bytes.Buffer
	if err := kitValue(&buf, obj, keys, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func kitValue(buf *bytes.Buffer, v any, allow []string, depth int) error {
	if depth > maxKitDepth {
		return fmt.Errorf("canonicalize signed_data: nested deeper than %d", maxKitDepth)
	}
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("canonicalize signed_data: number %s: %w", x, err)
		}
		if math.IsInf(f, 0) { // JSON.parse reads it as Infinity, which stringifies as null
			buf.WriteString("null")
			return nil
		}
		s, err := jcs.NumberToJSON(f)
		if err != nil {
			return fmt.Errorf("canonicalize signed_data: number %s: %w", x, err)
		}
		buf.WriteString(s)
	case string:
		kitString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := kitValue(buf, e, allow, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		buf.WriteByte('{')
		first := true
		for _, k := range allow {
			e, ok := x[k]
			if !ok {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			kitString(buf, k)
			buf.WriteByte(':')
			if err := kitValue(buf, e, allow, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("canonicalize signed_data: unexpected %T", v)
	}
	return nil
}

// kitString writes s as JSON.stringify does: only ", \ and C0 controls
// escaped (\b \f \n \r \t by name, others as \u00xx), nothing else.
func kitString(buf *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			if c < 0x20 {
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			} else {
				buf.WriteByte(c)
			}
		}
	}
	buf.WriteByte('"')
}
