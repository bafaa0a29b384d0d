package cashu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// The small CBOR subset (RFC 8949) that cashuB tokens and creqA payment
// requests use: unsigned and negative integers, byte and text strings,
// arrays, maps with text keys, true, false, null and undefined, all of
// definite length. Anything else (tags, floats, indefinite lengths) is
// refused: neither format uses it, and a smaller decoder has less to get
// wrong on untrusted input. Written here rather than imported because
// the subset is some 200 lines and the decoder's limits are the point.

// ErrCBOR reports input that is not CBOR of the subset, or exceeds its
// limits.
var ErrCBOR = errors.New("cashu: malformed CBOR")

// maxCBORDepth bounds nesting. A token nests six deep (token, t, entry, p,
// proof, dleq), a payment request five; 16 leaves room and stops a stack
// of nested arrays from recursing without end.
const maxCBORDepth = 16

// cborUndefined stands for CBOR's undefined (0xf7), which cashu-ts writes
// for a payment request's absent optional fields.
type cborUndefined struct{}

// cborNegative is a negative integer, -1-n; nothing here accepts one, but
// the decoder reads it so the error says what was wrong.
type cborNegative uint64

// decodeCBOR decodes exactly one item filling b. Every length is checked
// against the bytes left before anything is allocated, so the memory used
// is bounded by a small multiple of len(b).
func decodeCBOR(b []byte) (any, error) {
	d := cborDecoder{b: b}
	v, err := d.item(0)
	if err != nil {
		return nil, err
	}
	if d.off != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the item", ErrCBOR, len(b)-d.off)
	}
	return v, nil
}

type cborDecoder struct {
	b   []byte
	off int
}

func (d *cborDecoder) left() uint64 { return uint64(len(d.b) - d.off) }

// head reads an item's initial byte and argument.
func (d *cborDecoder) head() (major byte, info byte, arg uint64, err error) {
	if d.off >= len(d.b) {
		return 0, 0, 0, fmt.Errorf("%w: unexpected end", ErrCBOR)
	}
	ib := d.b[d.off]
	d.off++
	major, info = ib>>5, ib&0x1f
	var n int
	switch {
	case info < 24:
		return major, info, uint64(info), nil
	case info <= 27:
		n = 1 << (info - 24)
	case info == 31:
		return 0, 0, 0, fmt.Errorf("%w: indefinite lengths are not supported", ErrCBOR)
	default:
		return 0, 0, 0, fmt.Errorf("%w: reserved additional information %d", ErrCBOR, info)
	}
	if d.left() < uint64(n) {
		return 0, 0, 0, fmt.Errorf("%w: unexpected end", ErrCBOR)
	}
	var buf [8]byte
	copy(buf[8-n:], d.b[d.off:d.off+n])
	d.off += n
	return major, info, binary.BigEndian.Uint64(buf[:]), nil
}

func (d *cborDecoder) item(depth int) (any, error) {
	if depth > maxCBORDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrCBOR, maxCBORDepth)
	}
	major, info, arg, err := d.head()
	if err != nil {
		return nil, err
	}
	switch major {
	case 0:
		return arg, nil
	case 1:
		return cborNegative(arg), nil
	case 2, 3:
		if arg > d.left() {
			return nil, fmt.Errorf("%w: string longer than the input", ErrCBOR)
		}
		s := d.b[d.off : d.off+int(arg)]
		d.off += int(arg)
		if major == 2 {
			return append([]byte(nil), s...), nil
		}
		if !utf8.Valid(s) {
			return nil, fmt.Errorf("%w: text is not UTF-8", ErrCBOR)
		}
		return string(s), nil
	case 4:
		// Each element takes at least one byte.
		if arg > d.left() {
			return nil, fmt.Errorf("%w: array longer than the input", ErrCBOR)
		}
		out := make([]any, 0, arg)
		for range arg {
			v, err := d.item(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case 5:
		if arg > d.left()/2 {
			return nil, fmt.Errorf("%w: map longer than the input", ErrCBOR)
		}
		out := make(map[string]any, arg)
		for range arg {
			k, err := d.item(depth + 1)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("%w: map key is not text", ErrCBOR)
			}
			if _, dup := out[ks]; dup {
				return nil, fmt.Errorf("%w: duplicate map key %q", ErrCBOR, ks)
			}
			if out[ks], err = d.item(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case 7:
		switch {
		case info == 20:
			return false, nil
		case info == 21:
			return true, nil
		case info == 22:
			return nil, nil
		case info == 23:
			return cborUndefined{}, nil
		case info >= 25 && info <= 27:
			return nil, fmt.Errorf("%w: floating-point values are not supported", ErrCBOR)
		}
		return nil, fmt.Errorf("%w: simple value %d is not supported", ErrCBOR, arg)
	}
	return nil, fmt.Errorf("%w: tags are not supported", ErrCBOR)
}

// cborEncoder writes the subset in the order its caller gives, which is
// how the encodings here match cashu-ts and the NUT vectors byte for byte.
type cborEncoder struct{ b []byte }

func (e *cborEncoder) head(major byte, n uint64) {
	m := major << 5
	switch {
	case n < 24:
		e.b = append(e.b, m|byte(n))
	case n <= math.MaxUint8:
		e.b = append(e.b, m|24, byte(n))
	case n <= math.MaxUint16:
		e.b = binary.BigEndian.AppendUint16(append(e.b, m|25), uint16(n))
	case n <= math.MaxUint32:
		e.b = binary.BigEndian.AppendUint32(append(e.b, m|26), uint32(n))
	default:
		e.b = binary.BigEndian.AppendUint64(append(e.b, m|27), n)
	}
}

func (e *cborEncoder) uint(n uint64)  { e.head(0, n) }
func (e *cborEncoder) bytes(b []byte) { e.head(2, uint64(len(b))); e.b = append(e.b, b...) }
func (e *cborEncoder) text(s string)  { e.head(3, uint64(len(s))); e.b = append(e.b, s...) }
func (e *cborEncoder) array(n int)    { e.head(4, uint64(n)) }
func (e *cborEncoder) mapOf(n int)    { e.head(5, uint64(n)) }
func (e *cborEncoder) undefined()     { e.b = append(e.b, 0xf7) }
func (e *cborEncoder) key(k string)   { e.text(k) }

func (e *cborEncoder) boolean(v bool) {
	if v {
		e.b = append(e.b, 0xf5)
	} else {
		e.b = append(e.b, 0xf4)
	}
}

func (e *cborEncoder) textArray(s []string) {
	e.array(len(s))
	for _, v := range s {
		e.text(v)
	}
}

// fields reads a decoded CBOR map. Its errors name keys, never values:
// the values are token secrets.
type fields map[string]any

func asFields(v any, what string) (fields, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a map", ErrCBOR, what)
	}
	return fields(m), nil
}

// get returns the value of key, nil when absent, null or undefined.
func (f fields) get(key string) any {
	switch v := f[key].(type) {
	case cborUndefined:
		return nil
	default:
		return v
	}
}

func (f fields) text(key string, required bool) (string, error) {
	v := f.get(key)
	if v == nil {
		if required {
			return "", fmt.Errorf("%w: %q is missing", ErrCBOR, key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q is not text", ErrCBOR, key)
	}
	return s, nil
}

func (f fields) byteString(key string, required bool) ([]byte, error) {
	v := f.get(key)
	if v == nil {
		if required {
			return nil, fmt.Errorf("%w: %q is missing", ErrCBOR, key)
		}
		return nil, nil
	}
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a byte string", ErrCBOR, key)
	}
	return b, nil
}

func (f fields) uint(key string, required bool) (uint64, error) {
	v := f.get(key)
	if v == nil {
		if required {
			return 0, fmt.Errorf("%w: %q is missing", ErrCBOR, key)
		}
		return 0, nil
	}
	n, ok := v.(uint64)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not an unsigned integer", ErrCBOR, key)
	}
	return n, nil
}

func (f fields) boolean(key string) (bool, error) {
	v := f.get(key)
	if v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%w: %q is not a boolean", ErrCBOR, key)
	}
	return b, nil
}

func (f fields) array(key string, required bool) ([]any, error) {
	v := f.get(key)
	if v == nil {
		if required {
			return nil, fmt.Errorf("%w: %q is missing", ErrCBOR, key)
		}
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an array", ErrCBOR, key)
	}
	return a, nil
}

func (f fields) textArray(key string) ([]string, error) {
	a, err := f.array(key, false)
	if err != nil || a == nil {
		return nil, err
	}
	out := make([]string, len(a))
	for i, v := range a {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %q[%d] is not text", ErrCBOR, key, i)
		}
		out[i] = s
	}
	return out, nil
}

// tags reads an array of text arrays: NUT-18's transport and NUT-10 tags.
func (f fields) tags(key string) ([][]string, error) {
	a, err := f.array(key, false)
	if err != nil || a == nil {
		return nil, err
	}
	out := make([][]string, len(a))
	for i, v := range a {
		inner, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: %q[%d] is not an array", ErrCBOR, key, i)
		}
		out[i] = make([]string, len(inner))
		for j, s := range inner {
			if out[i][j], ok = s.(string); !ok {
				return nil, fmt.Errorf("%w: %q[%d][%d] is not text", ErrCBOR, key, i, j)
			}
		}
	}
	return out, nil
}
