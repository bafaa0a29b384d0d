package commonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
)

// FuzzHash checks, for any name and inputSchema, that Hash never panics,
// fails only with the package's sentinel errors, gives the same answer twice,
// and gives the same hash for the same schema written another way (members
// in another order, other whitespace, other escapes, numbers spelled
// differently), and that hashing an already normalized schema changes
// nothing.
func FuzzHash(f *testing.F) {
	vectors, _ := loadVectors(f)
	for _, v := range vectors {
		var tool Tool
		if json.Unmarshal(v.Tool, &tool) == nil && len(tool.InputSchema) > 0 {
			f.Add(tool.Name, []byte(tool.InputSchema))
		}
	}
	f.Add("t", []byte(`{"a":[1e21,-0,1E-7,9007199254740993,"\ud83d\ude00\u00e9"],"title":1,"x-a":{},"__proto__":{"$ref":"#"}}`))
	f.Add("t", []byte(`{"properties":{"title":{},"\ufb33":{},"\ud83d\ude00":{}}}`))
	f.Add("t", []byte(`{"$ref":"x"}`))
	f.Add("t", []byte(`{"a":"\ud800"}`))
	f.Add("t", []byte(`{"a":1,"a":2}`))
	f.Add("", []byte(`{}`))

	f.Fuzz(func(t *testing.T, name string, schema []byte) {
		tool := Tool{Name: name, InputSchema: schema}
		hash, err := Hash(tool)
		again, err2 := Hash(tool)
		if hash != again || errString(err) != errString(err2) {
			t.Fatalf("not deterministic: %q %v, then %q %v", hash, err, again, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidTool) && !errors.Is(err, ErrExternalRef) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}

		// Hash accepted the schema, so it is I-JSON and encoding/json reads
		// it without loss.
		dec := json.NewDecoder(bytes.NewReader(schema))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Hash accepted what encoding/json rejects: %v", err)
		}
		for _, reverse := range []bool{false, true} {
			var buf bytes.Buffer
			rewrite(t, &buf, v, reverse)
			other, err := Hash(Tool{Name: name, InputSchema: buf.Bytes()})
			if err != nil || other != hash {
				t.Fatalf("the same schema written as\n%s\nhashes to %q (%v), not %q", buf.Bytes(), other, err, hash)
			}
		}

		payload, err := canonicalPayload(tool)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Fatal(err)
		}
		if again, err := Hash(Tool{Name: name, InputSchema: p.InputSchema}); err != nil || again != hash {
			t.Fatalf("the normalized schema %s hashes to %q (%v), not %q", p.InputSchema, again, err, hash)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// rewrite writes v as JSON in another spelling: members sorted (or in
// reverse), strings as encoding/json escapes them, numbers in Go's 'e'
// notation when reverse is set, and newlines between members.
func rewrite(t *testing.T, w *bytes.Buffer, v any, reverse bool) {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		if reverse {
			slices.Reverse(keys)
		}
		w.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				w.WriteString(",\n")
			}
			b, _ := json.Marshal(k)
			w.Write(b)
			w.WriteString(" : ")
			rewrite(t, w, v[k], reverse)
		}
		w.WriteString("}")
	case []any:
		w.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				w.WriteString(" , ")
			}
			rewrite(t, w, e, reverse)
		}
		w.WriteString(" ]")
	case json.Number:
		if !reverse {
			w.WriteString(v.String())
			return
		}
		f, err := strconv.ParseFloat(v.String(), 64)
		if err != nil {
			t.Fatalf("%s: %v", v, err) // Hash accepted it, so it is in range
		}
		w.WriteString(strconv.FormatFloat(f, 'e', -1, 64))
	default:
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
}
