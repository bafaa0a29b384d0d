package clientgen

import (
	"encoding/json"
	"testing"
)

// FuzzGenerateGo: for any schema and names, Go returns an error or code
// that parses and type-checks; TypeScript does not panic.
func FuzzGenerateGo(f *testing.F) {
	for _, t := range hostileTools() {
		if len(t.InputSchema) > 16<<10 {
			continue // the huge enum: minimizing what grows from it takes minutes
		}
		f.Add(t.Name, "x", []byte(t.InputSchema), []byte(t.OutputSchema))
	}
	f.Add("add", "a b", []byte(`{"type":"object","properties":{"a b":{"$ref":"#/$defs/x"}},"$defs":{"x":{"enum":["1","-","_"]}}}`), []byte(`{"$ref":"#/$defs/x","$defs":{"x":{"type":"array","items":{"$ref":"#"}}}}`))
	f.Fuzz(func(t *testing.T, name, prop string, input, output []byte) {
		tools := []Tool{
			{Name: name, Description: prop, InputSchema: json.RawMessage(input), OutputSchema: json.RawMessage(output)},
			// A second tool whose property is the fuzzer's name too.
			{Name: prop, InputSchema: propertySchema(prop, input)},
		}
		src, err := Go(Options{Package: "fuzz", Source: Source{Name: name, Server: prop}, Tools: tools})
		if err != nil {
			return
		}
		if err := typeCheck(t, src); err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		if _, err := TypeScript(Options{Package: name, Tools: tools}); err != nil {
			t.Fatalf("Go accepted what TypeScript refused: %v", err)
		}
	})
}

// propertySchema is an object schema with one property, prop, whose schema
// is schema when that is JSON.
func propertySchema(prop string, schema []byte) json.RawMessage {
	var s any
	if json.Unmarshal(schema, &s) != nil {
		s = map[string]any{"type": "string"}
	}
	b, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{prop: s}, "required": []string{prop}})
	if err != nil {
		return nil
	}
	return b
}
