package clientgen

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Limits on what a schema may make the generator write. Beyond them a
// value is typed loosely (any, json.RawMessage) with a comment that says
// why: the code stays valid and of a size a person can read.
const (
	// maxDepth is how deeply nested schemas are typed.
	maxDepth = 32
	// maxEnum is how many values an enum may have to be spelt out
	// (constants in Go, a union of literals in TypeScript).
	maxEnum = 256
	// maxTypes bounds the named types of one generated file.
	maxTypes = 10000
)

// kind is what a schema says of a JSON value, as far as the generator
// types it.
type kind int

const (
	kAny     kind = iota // any JSON value
	kUnion               // oneOf, anyOf, allOf: kept as raw JSON
	kString              // string, possibly one of enum
	kInteger             // integer
	kNumber              // number
	kBool                // boolean
	kNull                // null only
	kArray               // array of elem
	kMap                 // object with values of elem, no declared properties
	kObject              // object with declared properties (obj)
	kRef                 // a named type (ref)
)

// shape is a schema as the generator types it.
type shape struct {
	kind     kind
	elem     *shape   // kArray, kMap
	obj      *object  // kObject
	ref      *decl    // kRef
	enum     []string // kString in a decl of its own: the values allowed
	nullable bool     // the schema also allows null
	note     string   // why the value is typed loosely
}

// object is the declared properties of an object schema.
type object struct {
	props []*prop
}

// prop is one declared property.
type prop struct {
	name     string // as in JSON
	doc      string
	shape    *shape
	required bool
}

// decl is a named type: a tool's input or output, a $defs entry, a nested
// object. hint is its name before a language's rules make it an
// identifier.
type decl struct {
	hint  string
	doc   string
	shape *shape
}

// tool is a tool as the generator types it: its input and, when the tool
// declares one, its output.
type tool struct {
	Tool
	hash   string
	hint   string // the tool's name as a type name hint
	input  *decl
	output *decl // nil without an outputSchema
}

// model is everything one generated file declares.
type model struct {
	tools []*tool
	decls []*decl
}

// build types the tools' schemas. Tools are sorted by name, so that the
// output (and the names collisions get) depends only on the tool list.
func build(tools []Tool) (*model, error) {
	m := &model{}
	sorted := slices.Clone(tools)
	slices.SortFunc(sorted, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	for i, t := range sorted {
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, fmt.Errorf("%w: two tools are named %q", ErrInvalidTool, clip(t.Name, 80))
		}
		hash, err := toolHash(t)
		if err != nil {
			return nil, err
		}
		tl := &tool{Tool: t, hash: hash, hint: pascal(t.Name, "Tool")}
		if tl.input, err = m.root(tl.hint, "Input", "The arguments of "+t.Name+".", t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: inputSchema: %w", t.Name, err)
		}
		if hasSchema(t.OutputSchema) {
			if tl.output, err = m.root(tl.hint, "Output", "The structured result of "+t.Name+".", t.OutputSchema); err != nil {
				return nil, fmt.Errorf("tool %q: outputSchema: %w", t.Name, err)
			}
		}
		m.tools = append(m.tools, tl)
	}
	if len(m.decls) > maxTypes {
		return nil, fmt.Errorf("%w: the schemas need %d types, more than %d", ErrTooLarge, len(m.decls), maxTypes)
	}
	return m, nil
}

func hasSchema(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

// root types one of a tool's schemas (which is "Input" or "Output") as
// the named type tool+which; tool names its $defs too. An input must be a
// JSON object: a schema that says otherwise is typed as a map.
func (m *model) root(tool, which, doc string, raw json.RawMessage) (*decl, error) {
	var schema any
	if hasSchema(raw) {
		if err := json.Unmarshal(raw, &schema); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidTool, err)
		}
	}
	d := m.declare(tool+which, doc)
	b := &builder{m: m, prefix: tool, root: schema, top: d, refs: map[string]*decl{}}
	b.fill(d, schema, 0)
	if d.target() == nil {
		d.shape = &shape{kind: kAny, note: "the schema refers to itself and nothing else"}
	}
	if which == "Input" && !objectLike(d.shape) {
		d.shape = &shape{kind: kMap, elem: &shape{kind: kAny}, note: "the input schema does not describe a JSON object"}
	}
	return d, nil
}

// objectLike reports whether values of s are JSON objects.
func objectLike(s *shape) bool {
	if s.kind == kRef {
		d := s.ref.target()
		return d != nil && (d.shape.kind == kObject || d.shape.kind == kMap)
	}
	return s.kind == kObject || s.kind == kMap
}

// target is the decl d stands for: d, or the one a schema that is only a
// $ref names; nil when such references go round in a circle.
func (d *decl) target() *decl {
	for range maxDepth {
		if d.shape.kind != kRef {
			return d
		}
		d = d.shape.ref
	}
	return nil
}

func (m *model) declare(hint, doc string) *decl {
	d := &decl{hint: hint, doc: doc}
	m.decls = append(m.decls, d)
	return d
}

// builder types one schema document, whose $defs its $refs name.
type builder struct {
	m      *model
	prefix string // the tool's hint, before the names of $defs
	root   any
	top    *decl            // the type "#" names
	refs   map[string]*decl // $ref → its type, made on first use
}

// shape types schema; hint names the types nested objects need.
func (b *builder) shape(schema any, hint string, depth int) *shape {
	if depth > maxDepth {
		return &shape{kind: kUnion, note: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
	}
	s, ok := schema.(map[string]any)
	if !ok {
		// true, false, or no schema: anything (false admits nothing,
		// which no type says).
		return &shape{kind: kAny}
	}
	if ref, ok := s["$ref"].(string); ok {
		return b.ref(ref, depth)
	}
	k := combinator(s)
	if k != "" && !hasProperties(s) {
		return &shape{kind: kUnion, note: "the schema is a " + k + ", not typed here"}
	}
	types, nullable := schemaTypes(s)
	out := b.typed(s, types, hint, depth)
	out.nullable = out.nullable || nullable
	if k != "" {
		out.note = "its " + k + " is not checked here"
	}
	return out
}

// combinator is the first of oneOf, anyOf and allOf the schema has, "" for
// none. Beside properties it only constrains them (one of several
// required, say): the properties are typed, the constraint is not.
func combinator(s map[string]any) string {
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		if _, ok := s[k]; ok {
			return k
		}
	}
	return ""
}

// schemaTypes reads "type": one name or a list; null in a list of two
// makes the other nullable.
func schemaTypes(s map[string]any) (types []string, nullable bool) {
	switch t := s["type"].(type) {
	case string:
		return []string{t}, false
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok && name == "null" {
				nullable = true
			} else if ok {
				types = append(types, name)
			}
		}
		if len(types) == 0 && nullable {
			return []string{"null"}, false
		}
		return types, nullable
	}
	// No type: the keywords say which.
	switch {
	case s["properties"] != nil:
		return []string{"object"}, false
	case s["items"] != nil:
		return []string{"array"}, false
	case s["enum"] != nil || s["const"] != nil:
		if vals, ok := stringEnum(s); ok && len(vals) > 0 {
			return []string{"string"}, false
		}
	}
	return nil, false
}

func (b *builder) typed(s map[string]any, types []string, hint string, depth int) *shape {
	if len(types) != 1 {
		if len(types) > 1 {
			return &shape{kind: kAny, note: "one of the types " + strings.Join(types, ", ")}
		}
		return &shape{kind: kAny}
	}
	switch types[0] {
	case "string":
		vals, ok := stringEnum(s)
		switch {
		case !ok || len(vals) == 0:
			return &shape{kind: kString}
		case len(vals) > maxEnum:
			return &shape{kind: kString, note: fmt.Sprintf("one of %d values", len(vals))}
		}
		d := b.m.declare(hint, "")
		d.shape = &shape{kind: kString, enum: vals}
		return &shape{kind: kRef, ref: d}
	case "integer":
		return &shape{kind: kInteger}
	case "number":
		return &shape{kind: kNumber}
	case "boolean":
		return &shape{kind: kBool}
	case "null":
		return &shape{kind: kNull}
	case "array":
		return &shape{kind: kArray, elem: b.shape(s["items"], hint+"Item", depth+1)}
	case "object":
		return b.object(s, hint, depth)
	}
	return &shape{kind: kAny, note: fmt.Sprintf("unknown type %q", clip(types[0], 40))}
}

// object types an object schema: its declared properties as a named type,
// or, with none, a map of additionalProperties.
func (b *builder) object(s map[string]any, hint string, depth int) *shape {
	if !hasProperties(s) {
		return &shape{kind: kMap, elem: b.shape(s["additionalProperties"], hint+"Value", depth+1)}
	}
	d := b.m.declare(hint, "")
	d.shape = &shape{kind: kObject, obj: b.properties(s, hint, depth)}
	return &shape{kind: kRef, ref: d}
}

func hasProperties(s map[string]any) bool {
	props, _ := s["properties"].(map[string]any)
	return len(props) > 0
}

// fill types schema as d: an object with properties is d itself rather
// than a type d would only rename.
func (b *builder) fill(d *decl, schema any, depth int) {
	s, _ := schema.(map[string]any)
	types, _ := schemaTypes(s)
	_, isRef := s["$ref"]
	if s != nil && !isRef && len(types) == 1 && types[0] == "object" && hasProperties(s) {
		d.shape = &shape{kind: kObject, obj: b.properties(s, d.hint, depth)}
		if k := combinator(s); k != "" {
			d.shape.note = "its " + k + " is not checked here"
		}
		return
	}
	d.shape = b.shape(schema, d.hint, depth)
}

// properties types the declared properties of an object schema.
func (b *builder) properties(s map[string]any, hint string, depth int) *object {
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if list, ok := s["required"].([]any); ok {
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	obj := &object{}
	for _, name := range names {
		p := &prop{name: name, required: required[name], doc: describe(props[name])}
		p.shape = b.shape(props[name], hint+pascal(name, "Field"), depth+1)
		obj.props = append(obj.props, p)
	}
	return obj
}

// ref types a $ref: "#" (the schema itself) or a member of the root's
// $defs or definitions. A chain of references that ends where it started
// names no type, and other references are not followed.
func (b *builder) ref(ref string, depth int) *shape {
	seen := map[string]bool{}
	for {
		if ref == "#" {
			return &shape{kind: kRef, ref: b.top}
		}
		if d, ok := b.refs[ref]; ok {
			return &shape{kind: kRef, ref: d}
		}
		if seen[ref] {
			return &shape{kind: kAny, note: "$ref " + clip(ref, 80) + " refers to itself"}
		}
		seen[ref] = true
		name, target, ok := b.lookup(ref)
		if !ok {
			return &shape{kind: kAny, note: "$ref " + clip(ref, 80) + " is not followed"}
		}
		if next, ok := target.(map[string]any)["$ref"].(string); ok {
			ref = next
			continue
		}
		d := b.m.declare(b.prefix+pascal(name, "Def"), describe(target))
		b.refs[ref] = d // before its shape: the definition may refer to itself
		b.fill(d, target, depth+1)
		return &shape{kind: kRef, ref: d}
	}
}

// lookup finds "#/$defs/NAME" or "#/definitions/NAME" in the root.
func (b *builder) lookup(ref string) (name string, target any, ok bool) {
	frag, found := strings.CutPrefix(ref, "#/")
	if !found {
		return "", nil, false
	}
	parts := strings.Split(frag, "/")
	if len(parts) != 2 || (parts[0] != "$defs" && parts[0] != "definitions") {
		return "", nil, false
	}
	name, err := url.PathUnescape(parts[1])
	if err != nil {
		return "", nil, false
	}
	name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
	root, _ := b.root.(map[string]any)
	defs, _ := root[parts[0]].(map[string]any)
	target, ok = defs[name].(map[string]any)
	return name, target, ok
}

// stringEnum reads enum (or const) when every value is a string.
func stringEnum(s map[string]any) ([]string, bool) {
	var vals []any
	if c, ok := s["const"]; ok {
		vals = []any{c}
	} else if e, ok := s["enum"].([]any); ok {
		vals = e
	} else {
		return nil, false
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			return nil, false
		}
		if !slices.Contains(out, str) {
			out = append(out, str)
		}
	}
	return out, true
}

// describe is a schema's description, else its title.
func describe(schema any) string {
	s, _ := schema.(map[string]any)
	if d, ok := s["description"].(string); ok && d != "" {
		return d
	}
	t, _ := s["title"].(string)
	return t
}
