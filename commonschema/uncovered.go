package commonschema

import (
	"maps"
	"slices"
	"strconv"
)

// holdsNames reports whether a keyword's value maps names chosen by the
// schema's author (property names, definition names) to schemas, or for
// dependentRequired and draft-07 dependencies to lists of property names.
// The normalization treats those names like keywords, so a name it drops
// takes its whole entry out of the hash.
func holdsNames(keyword string) bool {
	switch keyword {
	case "properties", "patternProperties", "dependentSchemas", "dependentRequired",
		"$defs",
		"definitions", "dependencies": // draft-07
		return true
	}
	return false
}

// holdsSchemas reports whether a keyword's value is a schema or an array of
// schemas (JSON Schema 2020-12 and draft-07).
func holdsSchemas(keyword string) bool {
	switch keyword {
	case "additionalProperties", "unevaluatedProperties", "propertyNames",
		"items", "prefixItems", "additionalItems", "unevaluatedItems", "contains",
		"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "contentSchema":
		return true
	}
	return false
}

// UncoveredProperties lists, as JSON Pointers into the tool (for example
// "/inputSchema/properties/title"), the properties and definitions that the
// schema hash does not cover because their names are ones the normalization
// drops: title, description, default, examples, deprecated, readOnly,
// writeOnly, __proto__ and x-…. Two tools that differ only there share a
// hash, so a verified hash says nothing about them; a tool can warn. The
// list is sorted by position and is empty for almost every real tool. It
// fails, like Hash, for schemas that cannot be canonicalized.
func UncoveredProperties(t Tool) ([]string, error) {
	var out []string
	for _, s := range []struct {
		field string
		raw   []byte
	}{{"inputSchema", t.InputSchema}, {"outputSchema", t.OutputSchema}} {
		if len(s.raw) == 0 {
			continue
		}
		v, err := decodeCanonical(s.raw, s.field)
		if err != nil {
			return nil, err
		}
		out = uncovered(v, "/"+s.field, out)
	}
	return out, nil
}

// uncovered walks a schema, following only the keywords that hold schemas,
// and appends the pointers of the named entries that the hash drops.
func uncovered(schema any, ptr string, out []string) []string {
	obj, ok := schema.(map[string]any)
	if !ok {
		return out // a boolean schema, or a malformed one: nothing named inside
	}
	for _, kw := range slices.Sorted(maps.Keys(obj)) {
		if dropped(kw) || kw == protoKey {
			continue // a keyword the hash ignores, holding no schemas
		}
		p := ptr + "/" + escapePointer(kw)
		switch v := obj[kw]; {
		case holdsNames(kw):
			entries, _ := v.(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(entries)) {
				np := p + "/" + escapePointer(name)
				if dropped(name) || name == protoKey {
					out = append(out, np)
					continue
				}
				out = uncovered(entries[name], np, out)
			}
		case holdsSchemas(kw):
			if list, ok := v.([]any); ok {
				for i, e := range list {
					out = uncovered(e, p+"/"+strconv.Itoa(i), out)
				}
			} else {
				out = uncovered(v, p, out)
			}
		}
	}
	return out
}
