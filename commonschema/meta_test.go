package commonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const weatherTool = `{"name":"get_weather","description":"Weather <b>now</b> & later","inputSchema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}`

func weatherHash(t *testing.T) string {
	t.Helper()
	var tool Tool
	if err := json.Unmarshal([]byte(weatherTool), &tool); err != nil {
		t.Fatal(err)
	}
	h, err := Hash(tool)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// withMeta returns weatherTool with the given _meta member.
func withMeta(meta string) []byte {
	return []byte(strings.TrimSuffix(weatherTool, "}") + `,"_meta":` + meta + `}`)
}

func TestClaimed(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool []byte
		want string
		ok   bool
	}{
		{"claim", withMeta(`{"io.contextvm/common-schema":{"schemaHash":"abc"}}`), "abc", true},
		{"claim beside other entries", withMeta(`{"x":1,"io.contextvm/common-schema":{"v":2,"schemaHash":"abc"}}`), "abc", true},
		{"no _meta", []byte(weatherTool), "", false},
		{"_meta without the namespace", withMeta(`{"io.contextvm/other":{"schemaHash":"abc"}}`), "", false},
		{"namespace not an object", withMeta(`{"io.contextvm/common-schema":"abc"}`), "", false},
		{"schemaHash not a string", withMeta(`{"io.contextvm/common-schema":{"schemaHash":12}}`), "", false},
		{"schemaHash null", withMeta(`{"io.contextvm/common-schema":{"schemaHash":null}}`), "", false},
		{"_meta not an object", withMeta(`[]`), "", false},
		{"not an object", []byte(`["_meta"]`), "", false},
		{"not JSON", []byte(`{"_meta":`), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Claimed(tc.tool)
			if got != tc.want || ok != tc.ok {
				t.Errorf("%q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestVerifyClaim(t *testing.T) {
	right := weatherHash(t)
	claim := func(h string) []byte {
		return withMeta(`{"io.contextvm/common-schema":{"schemaHash":"` + h + `"}}`)
	}

	got, err := VerifyClaim(claim(right))
	if err != nil || got != right {
		t.Fatalf("a true claim: %q, %v", got, err)
	}

	if _, err := VerifyClaim([]byte(weatherTool)); !errors.Is(err, ErrNoClaim) {
		t.Errorf("no claim: %v, want ErrNoClaim", err)
	}

	wrong := strings.Repeat("0", 64)
	_, err = VerifyClaim(claim(wrong))
	if !errors.Is(err, ErrHashMismatch) || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), right) {
		t.Errorf("a false claim: %v; want ErrHashMismatch naming %s and %s", err, wrong, right)
	}
	if _, err := VerifyClaim(claim(strings.ToUpper(right))); !errors.Is(err, ErrHashMismatch) {
		t.Errorf("an uppercase claim: %v, want ErrHashMismatch", err)
	}

	// A tool whose schemas cannot be hashed cannot be verified: the reason is
	// the schema, not the claim.
	bad := []byte(`{"name":"r","inputSchema":{"$ref":"https://example.com/"},"_meta":{"io.contextvm/common-schema":{"schemaHash":"` + wrong + `"}}}`)
	if _, err := VerifyClaim(bad); !errors.Is(err, ErrExternalRef) {
		t.Errorf("an unhashable tool: %v, want ErrExternalRef", err)
	}
}

func TestAnnotate(t *testing.T) {
	right := weatherHash(t)
	for _, tc := range []struct {
		name string
		tool []byte
		// members of the namespace object other than schemaHash, and of
		// _meta other than the namespace, that must survive
		keepNS, keepMeta map[string]any
	}{
		{name: "no _meta", tool: []byte(weatherTool)},
		{name: "other _meta entries", tool: withMeta(`{"other/ns":{"a":1}}`), keepMeta: map[string]any{"other/ns": map[string]any{"a": json.Number("1")}}},
		{name: "other namespace fields", tool: withMeta(`{"io.contextvm/common-schema":{"note":"kept"}}`), keepNS: map[string]any{"note": "kept"}},
		{name: "stale claim replaced", tool: withMeta(`{"io.contextvm/common-schema":{"schemaHash":"deadbeef"}}`)},
		{name: "namespace not an object", tool: withMeta(`{"io.contextvm/common-schema":7}`)},
		{name: "_meta not an object", tool: withMeta(`"x"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, hash, err := Annotate(tc.tool)
			if err != nil {
				t.Fatal(err)
			}
			if hash != right {
				t.Fatalf("hash %s, want %s", hash, right)
			}
			if got, err := VerifyClaim(out); err != nil || got != right {
				t.Fatalf("the annotated tool does not verify: %v\n%s", err, out)
			}
			var doc struct {
				Name        string
				Description string
				InputSchema json.RawMessage
				Meta        map[string]json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Name != "get_weather" || doc.Description != "Weather <b>now</b> & later" || !bytes.Contains(out, []byte("<b>now</b> & later")) {
				t.Errorf("other members changed: %s", out)
			}
			var ns map[string]any
			decodeNumbers(t, doc.Meta[Namespace], &ns)
			delete(ns, "schemaHash")
			if !equalJSON(ns, tc.keepNS) {
				t.Errorf("namespace fields %v, want %v kept", ns, tc.keepNS)
			}
			delete(doc.Meta, Namespace)
			meta := map[string]any{}
			for k, v := range doc.Meta {
				var x any
				decodeNumbers(t, v, &x)
				meta[k] = x
			}
			if !equalJSON(meta, tc.keepMeta) {
				t.Errorf("_meta entries %v, want %v kept", meta, tc.keepMeta)
			}

			again, _, err := Annotate(out)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("annotating an annotated tool changed it:\n%s\n%s", out, again)
			}
		})
	}
}

// A tool that already carries its hash comes back byte for byte: a server
// re-announcing does not churn.
func TestAnnotate_KeepsARightClaimUntouched(t *testing.T) {
	tool := withMeta(`{ "io.contextvm/common-schema" : { "schemaHash" : "` + weatherHash(t) + `" } }`)
	out, _, err := Annotate(tool)
	if err != nil || !bytes.Equal(out, tool) {
		t.Fatalf("%v\n%s\n%s", err, tool, out)
	}
}

func TestAnnotate_RefusesWhatCannotBeHashed(t *testing.T) {
	for _, tc := range []struct {
		tool string
		want error
	}{
		{`{"name":"r","inputSchema":{"$ref":"a.json"}}`, ErrExternalRef},
		{`{"inputSchema":{}}`, ErrInvalidTool},
		{`"tool"`, ErrInvalidTool},
	} {
		if out, _, err := Annotate([]byte(tc.tool)); !errors.Is(err, tc.want) || out != nil {
			t.Errorf("%s: %s, %v; want %v", tc.tool, out, err, tc.want)
		}
	}
}

func decodeNumbers(t *testing.T, data []byte, v any) {
	t.Helper()
	if len(data) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}

// equalJSON compares two decoded maps, treating nil and empty alike.
func equalJSON(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
