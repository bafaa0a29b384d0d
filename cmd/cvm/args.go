package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// callArguments are the arguments of `cvm call` as given: one JSON object,
// or key=value pairs whose values are typed by the tool's input schema (a
// string stays a string, "3" becomes a number where the schema wants one,
// arrays and objects are given as JSON). Reading them needs nothing from
// the server, so that a mistake in their form is reported before anything
// is sent; typing them needs the schema, and comes after.
type callArguments struct {
	object map[string]any // the JSON object form
	pairs  []argPair      // the key=value form, in order
}

type argPair struct{ key, value string }

// parseArguments reads the arguments' form.
func parseArguments(args []string) (callArguments, error) {
	if len(args) == 1 && strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
		var out map[string]any
		if err := json.Unmarshal([]byte(args[0]), &out); err != nil {
			return callArguments{}, fmt.Errorf("arguments are not a JSON object: %w (quote the object: '{\"key\":\"value\"}')", err)
		}
		return callArguments{object: out}, nil
	}
	var c callArguments
	seen := map[string]bool{}
	for _, arg := range args {
		key, value, ok := strings.Cut(arg, "=")
		if !ok || key == "" {
			return callArguments{}, fmt.Errorf("argument %q: want key=value, or a single JSON object", arg)
		}
		if seen[key] {
			return callArguments{}, fmt.Errorf("argument %q given twice", key)
		}
		seen[key] = true
		c.pairs = append(c.pairs, argPair{key, value})
	}
	return c, nil
}

// typed returns the arguments as the tool gets them, key=value values
// typed by its input schema.
func (c callArguments) typed(inputSchema any) (map[string]any, error) {
	if c.object != nil {
		return c.object, nil
	}
	out := make(map[string]any, len(c.pairs))
	props := schemaProperties(inputSchema)
	for _, p := range c.pairs {
		v, err := typedValue(p.value, schemaTypes(props[p.key]))
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", p.key, err)
		}
		out[p.key] = v
	}
	return out, nil
}

// schemaProperties returns the properties member of an object schema.
func schemaProperties(schema any) map[string]any {
	m, _ := schema.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	return props
}

// schemaTypes returns the JSON types a property schema allows ("type" is a
// string or a list); none means anything.
func schemaTypes(prop any) []string {
	m, _ := prop.(map[string]any)
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// typedValue converts one command-line value to the first of types it
// fits; without types, JSON if it parses as JSON, else the string.
func typedValue(value string, types []string) (any, error) {
	if len(types) == 0 {
		var v any
		if json.Unmarshal([]byte(value), &v) == nil {
			return v, nil
		}
		return value, nil
	}
	for _, t := range types {
		switch t {
		case "integer":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				return n, nil
			}
		case "number":
			if f, err := strconv.ParseFloat(value, 64); err == nil {
				return f, nil
			}
		case "boolean":
			if b, err := strconv.ParseBool(value); err == nil {
				return b, nil
			}
		case "null":
			if value == "null" {
				return nil, nil
			}
		case "array", "object":
			var v any
			if err := json.Unmarshal([]byte(value), &v); err == nil {
				if _, isArr := v.([]any); isArr == (t == "array") {
					return v, nil
				}
			}
		case "string":
			return value, nil
		}
	}
	example := map[string]string{"integer": "42", "number": "2.5", "boolean": "true", "array": `'["a","b"]'`, "object": `'{"k":"v"}'`, "null": "null"}[types[0]]
	return nil, fmt.Errorf("%q is not %s (for example: %s)", value, describeTypes(types), example)
}

func describeTypes(types []string) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = map[string]string{"integer": "an integer", "number": "a number", "boolean": "a boolean", "array": "a JSON array",
			"object": "a JSON object", "null": "null", "string": "a string"}[t]
	}
	return strings.Join(slices.DeleteFunc(names, func(s string) bool { return s == "" }), " or ")
}
