package commonschema

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// RFC 8785's own examples, run through the whole pipeline rather than the
// jcs package alone: each example is the const of an inputSchema, and the
// canonical payload must hold the RFC's output byte for byte. That also
// proves that the decode–normalize–re-encode steps between the two
// canonicalizations lose nothing.

// canonicalConst returns the canonical form of value as the pipeline writes
// it inside a payload.
func canonicalConst(t *testing.T, value string) (string, error) {
	t.Helper()
	payload, err := canonicalPayload(Tool{Name: "rfc8785", InputSchema: json.RawMessage(`{"const":` + value + `}`)})
	if err != nil {
		return "", err
	}
	const prefix, suffix = `{"inputSchema":{"const":`, `},"name":"rfc8785"}`
	s := string(payload)
	if !strings.HasPrefix(s, prefix) || !strings.HasSuffix(s, suffix) {
		t.Fatalf("unexpected payload %s", s)
	}
	return s[len(prefix) : len(s)-len(suffix)], nil
}

func TestCanonical_RFC8785Examples(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			// §3.2.2: literals, numbers and strings.
			name: "3.2.2 primitives",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			// §3.2.3: members sorted by UTF-16 code units, so U+1F600
			// (D83D DE00) comes before U+FB33.
			name: "3.2.3 sorting",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
				"\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{
			// §3.2.4 note: no Unicode normalization.
			name: "3.2.4 unnormalized",
			in:   `{"Unnormalized Unicode":"A\u030a"}`,
			want: "{\"Unnormalized Unicode\":\"A\u030a\"}",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canonicalConst(t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// §3.2.4 gives the UTF-8 bytes of the §3.2.2 example's output.
func TestCanonical_RFC8785UTF8Bytes(t *testing.T) {
	const rfc = "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72" +
		" 75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a" +
		" 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31" +
		" 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37" +
		" 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30" +
		" 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d"
	wantHex := strings.ReplaceAll(rfc, " ", "")
	got, err := canonicalConst(t, `{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`)
	if err != nil {
		t.Fatal(err)
	}
	if h := hex.EncodeToString([]byte(got)); h != wantHex {
		t.Errorf("bytes\ngot  %s\nwant %s", h, wantHex)
	}
}

// Appendix B: IEEE 754 values and their serialization.
func TestCanonical_RFC8785NumberSamples(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		f := math.Float64frombits(tc.bits)
		// The input spells the value in Go's shortest form ('e' notation),
		// so the output's ECMAScript form comes from the pipeline, not from
		// the input's spelling.
		in := strconv.FormatFloat(f, 'e', -1, 64)
		if tc.bits == 0x8000000000000000 {
			in = "-0"
		}
		got, err := canonicalConst(t, in)
		if err != nil {
			t.Errorf("%016x (%s): %v", tc.bits, in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%016x (%s): got %s, want %s", tc.bits, in, got, tc.want)
		}
	}
}

// NaN and Infinity (Appendix B's last rows) have no JSON spelling; a number
// too large for a double is the JSON way to reach Infinity, and RFC 8785
// requires an error for it.
func TestCanonical_RFC8785RejectsInfinity(t *testing.T) {
	for _, in := range []string{"1e400", "-1e400", "1.8e308"} {
		if got, err := canonicalConst(t, in); !errors.Is(err, ErrInvalidTool) {
			t.Errorf("%s: got %q, %v; want ErrInvalidTool", in, got, err)
		}
	}
}
