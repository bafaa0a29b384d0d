package commonschema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func weather() Tool {
	return Tool{
		Name:         "get_weather",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}`),
	}
}

func TestHash_IsLowercaseHexSHA256OfTheCanonicalPayload(t *testing.T) {
	tool := weather()
	hash, err := Hash(tool)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := canonicalPayload(tool)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	if want := hex.EncodeToString(sum[:]); hash != want {
		t.Errorf("hash %s, want sha256 of the payload %s", hash, want)
	}
	if len(hash) != 64 || strings.ToLower(hash) != hash {
		t.Errorf("hash %q is not 64 lowercase hex digits", hash)
	}
}

func TestVerify(t *testing.T) {
	tool := weather()
	right, err := Hash(tool)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(tool, right); err != nil {
		t.Fatalf("the right hash: %v", err)
	}
	wrong := strings.Repeat("ab", 32)
	for _, claimed := range []string{wrong, strings.ToUpper(right), "", right[:63]} {
		err := Verify(tool, claimed)
		if !errors.Is(err, ErrHashMismatch) {
			t.Errorf("claim %q: %v, want ErrHashMismatch", claimed, err)
			continue
		}
		// The message is what a user sees: it names the tool and both hashes.
		for _, part := range []string{`"get_weather"`, `"` + claimed + `"`, right} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("claim %q: message %q does not contain %s", claimed, err, part)
			}
		}
	}
}

// A claim from the network lands in error messages and logs: it is quoted and
// cut short, so it can neither break a line nor flood it.
func TestVerify_QuotesAndShortensHostileClaims(t *testing.T) {
	claim := "x\n\x1b[31m" + strings.Repeat("y", 10000)
	err := Verify(weather(), claim)
	if !errors.Is(err, ErrHashMismatch) {
		t.Fatal(err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\n\x1b") || len(msg) > 400 {
		t.Errorf("message not sanitized (%d bytes): %q", len(msg), msg)
	}
}

func TestVerify_ReportsWhyAToolCannotBeHashed(t *testing.T) {
	tool := Tool{Name: "r", InputSchema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}
	err := Verify(tool, strings.Repeat("0", 64))
	if !errors.Is(err, ErrExternalRef) || errors.Is(err, ErrHashMismatch) {
		t.Fatalf("%v, want ErrExternalRef and not a mismatch", err)
	}
}

func TestHash_BadInputSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool Tool
		want error
		msg  []string
	}{
		{"no name", Tool{InputSchema: json.RawMessage(`{}`)}, ErrInvalidTool, []string{"missing name"}},
		{"name not UTF-8", Tool{Name: "a\xffb", InputSchema: json.RawMessage(`{}`)}, ErrInvalidTool, []string{"name is not valid UTF-8"}},
		{"no inputSchema", Tool{Name: "t"}, ErrInvalidTool, []string{"missing inputSchema"}},
		{"inputSchema null", Tool{Name: "t", InputSchema: json.RawMessage(` null `)}, ErrInvalidTool, []string{"inputSchema is null"}},
		{"inputSchema array", Tool{Name: "t", InputSchema: json.RawMessage(`[]`)}, ErrInvalidTool, []string{"inputSchema is not a JSON object"}},
		{"outputSchema string", Tool{Name: "t", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`"x"`)}, ErrInvalidTool, []string{"outputSchema is not a JSON object"}},
		{"syntax", Tool{Name: "t", InputSchema: json.RawMessage(`{"a":}`)}, ErrInvalidTool, []string{"inputSchema is not valid JSON", "invalid character"}},
		{"trailing data", Tool{Name: "t", InputSchema: json.RawMessage(`{} {}`)}, ErrInvalidTool, []string{"inputSchema is not valid JSON"}},
		{"invalid UTF-8", Tool{Name: "t", InputSchema: json.RawMessage("{\"a\":\"\xc3\x28\"}")}, ErrInvalidTool, []string{"inputSchema is not valid UTF-8"}},
		{"lone high surrogate", Tool{Name: "t", InputSchema: json.RawMessage(`{"enum":["\ud800x"]}`)}, ErrInvalidTool, []string{`lone UTF-16 surrogate \ud800`}},
		{"lone low surrogate in a name", Tool{Name: "t", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{"\uDC01":1}`)}, ErrInvalidTool, []string{`outputSchema holds the lone UTF-16 surrogate \uDC01`}},
		{"duplicate member", Tool{Name: "t", InputSchema: json.RawMessage(`{"a":1,"a":1}`)}, ErrInvalidTool, []string{"Duplicate key"}},
		{"number overflow", Tool{Name: "t", InputSchema: json.RawMessage(`{"maximum":1e999}`)}, ErrInvalidTool, []string{"out of range"}},
		{"external $ref", Tool{Name: "t", InputSchema: json.RawMessage(`{"properties":{"a/b":{"items":[{"$ref":"other.json#/x"}]}}}`)}, ErrExternalRef,
			[]string{`"other.json#/x"`, "/inputSchema/properties/a~1b/items/0/$ref"}},
		{"external $ref in outputSchema", Tool{Name: "t", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{"$ref":"urn:x"}`)}, ErrExternalRef,
			[]string{"/outputSchema/$ref"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hash, err := Hash(tc.tool)
			if !errors.Is(err, tc.want) {
				t.Fatalf("hash %q, error %v; want %v", hash, err, tc.want)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message %q does not contain %q", err, m)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message %q is not one line", err)
			}
		})
	}
}

// Of several external references, the same one is reported every time.
func TestHash_ErrorIsDeterministic(t *testing.T) {
	tool := Tool{Name: "t", InputSchema: json.RawMessage(`{"properties":{"a":{"$ref":"a.json"},"b":{"$ref":"b.json"},"c":{"$ref":"c.json"},"d":{"$ref":"d.json"}}}`)}
	_, first := Hash(tool)
	for range 50 {
		if _, err := Hash(tool); err.Error() != first.Error() {
			t.Fatalf("%v, then %v", first, err)
		}
	}
}

// Local references ("#…") are fine, and a $ref that is not a string is not a
// reference at all (it may be a property named $ref).
func TestHash_AcceptsLocalAndNonStringRefs(t *testing.T) {
	for _, schema := range []string{
		`{"$ref":"#"}`,
		`{"$defs":{"a":{}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		`{"properties":{"$ref":{"type":"string"}}}`,
	} {
		if _, err := Hash(Tool{Name: "t", InputSchema: json.RawMessage(schema)}); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
}

// A Go caller and a JSON decoder reach the same hash: an absent outputSchema,
// a nil one and JSON null are the same thing.
func TestHash_OutputSchemaNullIsAbsent(t *testing.T) {
	in := json.RawMessage(`{"type":"object"}`)
	want, err := Hash(Tool{Name: "t", InputSchema: in})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []json.RawMessage{nil, {}, json.RawMessage("null"), json.RawMessage(" null\n")} {
		if got, err := Hash(Tool{Name: "t", InputSchema: in, OutputSchema: out}); err != nil || got != want {
			t.Errorf("outputSchema %q: %s, %v; want %s", out, got, err, want)
		}
	}
	if got, _ := Hash(Tool{Name: "t", InputSchema: in, OutputSchema: json.RawMessage(`{}`)}); got == want {
		t.Error("an empty outputSchema hashes like none")
	}
}

func TestTool_UnmarshalJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Tool
		err      string
	}{
		{name: "hashed members only", in: `{"name":"a","description":"d","inputSchema":{"type":"object"},"outputSchema":{},"_meta":{}}`,
			want: Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{}`)}},
		// encoding/json would fill Name from "NAME"; JavaScript reads tool.name.
		{name: "names match exactly", in: `{"NAME":"a","InputSchema":{}}`, want: Tool{}},
		// JSON.parse keeps the last of duplicate members.
		{name: "last duplicate wins", in: `{"name":"a","name":"b","inputSchema":{}}`, want: Tool{Name: "b", InputSchema: json.RawMessage(`{}`)}},
		{name: "outputSchema null", in: `{"name":"a","inputSchema":{},"outputSchema":null}`, want: Tool{Name: "a", InputSchema: json.RawMessage(`{}`)}},
		{name: "escapes kept raw", in: `{"name":"\u00e9","inputSchema":{"a":"\u00e9"}}`, want: Tool{Name: "é", InputSchema: json.RawMessage(`{"a":"\u00e9"}`)}},
		{name: "null", in: `null`, want: Tool{}},
		{name: "array", in: `[]`, err: "not a JSON object"},
		{name: "name not a string", in: `{"name":null}`, err: "name is not a string"},
		{name: "name with a lone surrogate", in: `{"name":"a\udfff"}`, err: `lone UTF-16 surrogate \udfff`},
		{name: "name not UTF-8", in: "{\"name\":\"\xff\"}", err: "name is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Tool
			err := json.Unmarshal([]byte(tc.in), &got)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v; want ErrInvalidTool saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || string(got.InputSchema) != string(tc.want.InputSchema) || string(got.OutputSchema) != string(tc.want.OutputSchema) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A Tool written with encoding/json reads back to the same hash.
func TestTool_RoundTrip(t *testing.T) {
	tool := weather()
	data, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	var back Tool
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	h1, _ := Hash(tool)
	h2, err := Hash(back)
	if err != nil || h1 != h2 {
		t.Fatalf("%s vs %s (%v); JSON %s", h1, h2, err, data)
	}
}

func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for none
	}{
		{`"plain"`, ""},
		{`"\ud83d\ude00"`, ""},
		{`"\\ud800"`, ""},            // an escaped backslash, then text
		{`"\\\ud800"`, `\ud800`},     // an escaped backslash, then an escape
		{`"\ud800"`, `\ud800`},       // high at the end of a string
		{`"\ud800\u0041"`, `\ud800`}, // high followed by a non-surrogate
		{`"\ud800\ud800\udc00"`, `\ud800`},
		{`"\udc00\ud800"`, `\udc00`}, // a low one first
		{`"\u00e9\uDBFF\uDFFF"`, ""}, // the last pair
		{`"\ud8`, ""},                // truncated: not this function's business
	} {
		got, ok := loneSurrogate([]byte(tc.in))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
