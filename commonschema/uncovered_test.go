package commonschema

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestUncoveredProperties(t *testing.T) {
	tool := Tool{
		Name: "t",
		InputSchema: json.RawMessage(`{
			"title": "a keyword, not reported",
			"type": "object",
			"properties": {
				"title": {"type": "string"},
				"x-trace": {"type": "string"},
				"__proto__": {},
				"ok": {"type": "string", "description": "a keyword, not reported"},
				"properties": {"type": "object", "title": "a keyword inside a property named properties, not reported",
					"properties": {"default": {"type": "boolean"}}},
				"list": {"type": "array", "items": {"properties": {"examples": {}}}},
				"choice": {"anyOf": [{"properties": {"deprecated": {}}}, {"type": "null"}]},
				"fixed": {"const": {"title": "a value, not a property"}}
			},
			"$defs": {"readOnly": {"type": "string"}, "kept": {"properties": {"writeOnly": {}}}},
			"dependentRequired": {"description": ["ok"]}
		}`),
		OutputSchema: json.RawMessage(`{"properties": {"x-out": {}}, "additionalProperties": {"properties": {"title": {}}}}`),
	}
	got, err := UncoveredProperties(tool)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/inputSchema/$defs/kept/properties/writeOnly",
		"/inputSchema/$defs/readOnly",
		"/inputSchema/dependentRequired/description",
		"/inputSchema/properties/__proto__",
		"/inputSchema/properties/choice/anyOf/0/properties/deprecated",
		"/inputSchema/properties/list/items/properties/examples",
		"/inputSchema/properties/properties/properties/default",
		"/inputSchema/properties/title",
		"/inputSchema/properties/x-trace",
		"/outputSchema/additionalProperties/properties/title",
		"/outputSchema/properties/x-out",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestUncoveredProperties_NoneInAnOrdinaryTool(t *testing.T) {
	got, err := UncoveredProperties(weather())
	if err != nil || len(got) != 0 {
		t.Errorf("%q, %v; want none", got, err)
	}
}

func TestUncoveredProperties_EscapesPointers(t *testing.T) {
	got, err := UncoveredProperties(Tool{Name: "t", InputSchema: json.RawMessage(`{"properties":{"a/b~c":{"properties":{"x-":{}}}}}`)})
	if err != nil || !reflect.DeepEqual(got, []string{"/inputSchema/properties/a~1b~0c/properties/x-"}) {
		t.Errorf("%q, %v", got, err)
	}
}

func TestUncoveredProperties_FailsLikeHash(t *testing.T) {
	_, err := UncoveredProperties(Tool{Name: "t", InputSchema: json.RawMessage(`{"a":"\ud800"}`)})
	if !errors.Is(err, ErrInvalidTool) {
		t.Errorf("%v, want ErrInvalidTool", err)
	}
}
