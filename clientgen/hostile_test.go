package clientgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/commonschema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// nested is an object schema n levels deep.
func nested(n int) string {
	s := `{"type":"string"}`
	for i := range n {
		s = fmt.Sprintf(`{"type":"object","properties":{"level%d":%s},"required":["level%d"]}`, i, s, i)
	}
	return s
}

func enum(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("%q", fmt.Sprintf("v%d", i))
	}
	return `{"type":"string","enum":[` + strings.Join(vals, ",") + `]}`
}

// crowd is an object of up to n properties whose names are all the
// identifier X once made identifiers.
func crowd(n int) json.RawMessage {
	const seps = " -_.!#$%&()*+/:;<=>?@[]^{|}~"
	props := make(map[string]any, n)
	for _, a := range " " + seps {
		for _, b := range " " + seps {
			if len(props) < n {
				props[strings.TrimSpace(string(a)+"x"+string(b))] = map[string]string{"type": "string"}
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": []string{"x"}})
	return b
}

// hostileTools are tools whose names and schemas a careless generator
// would turn into code that does not compile.
func hostileTools() []Tool {
	return []Tool{
		{Name: "func", Description: "Keywords and names that collide once made identifiers.",
			InputSchema: raw(`{"type":"object","properties":{
				"type":{"type":"string"},"func":{"type":"integer"},"default":{"type":"boolean"},
				"a b":{"type":"number"},"a-b":{"type":"number"},"a_b":{"type":"number"},"AB":{"type":"number"},
				"日本":{"type":"string"},"名前":{"type":"string"},"123":{"type":"string"},"-":{"type":"string"},
				"$ref":{"type":"string"},"__proto__":{"type":"string"},"constructor":{"type":"string"}},
				"required":["type","func","a b"]}`)},
		{Name: "quotes", Description: "Property names no Go struct tag can spell.",
			InputSchema:  raw(`{"type":"object","properties":{"with\"quote":{"type":"string"},"back` + "`" + `tick":{"type":"string"},"comma,x":{"type":"string"},"":{"type":"string"}}}`),
			OutputSchema: raw(`{"type":"object","properties":{"new\nline":{"type":"string"}}}`)},
		{Name: "Client", InputSchema: raw(`{"type":"object"}`)},
		{Name: "client", InputSchema: raw(`{"type":"object"}`)},
		{Name: "close", InputSchema: raw(`{"type":"object"}`)},
		{Name: "constructor", InputSchema: raw(`{"type":"object"}`)},
		{Name: "New", InputSchema: raw(`{"type":"object","properties":{"x":{"type":"string"}}}`)},
		{Name: "café ☕ \u202Eevil", Description: "Unicode, */ and \u2028 line ends, \u0000 and a line that\ncvm:schema-hash \"evil\" 00\nwould record a hash.",
			InputSchema: raw(`{"type":"object","properties":{"é":{"type":"string","description":"*/ end \u2029 of comment"}}}`)},
		{Name: "deep", InputSchema: raw(nested(100)), OutputSchema: raw(nested(3))},
		{Name: "enums", InputSchema: raw(`{"type":"object","properties":{
			"huge":` + enum(10000) + `,
			"clash":{"enum":["a-b","a_b","A B","","\u2028","*/"]},
			"numbers":{"type":"integer","enum":[1,2,3]},
			"mixed":{"enum":["a",1,null]},
			"one":{"const":"only"}}}`)},
		{Name: "refs", InputSchema: raw(`{"type":"object","properties":{
			"node":{"$ref":"#/$defs/Node"},"loop":{"$ref":"#/$defs/A"},"missing":{"$ref":"#/$defs/Nope"},
			"self":{"$ref":"#"},"odd":{"$ref":"#/$defs/we~1ird%20name"},"list":{"$ref":"#/definitions/List"},
			"dict":{"$ref":"#/$defs/Dict"},"deep":{"$ref":"#/properties/node"}},
			"$defs":{"Node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/Node"}},"parent":{"$ref":"#/$defs/Node"}},"required":["parent"]},
				"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"},
				"we/ird name":{"type":"object","properties":{"x":{"type":"string"}}},
				"Dict":{"type":"object","additionalProperties":{"$ref":"#/$defs/Dict"}}},
			"definitions":{"List":{"type":"array","items":{"$ref":"#/definitions/List"}}}}`),
			OutputSchema: raw(`{"$ref":"#"}`)},
		{Name: "wrapped", InputSchema: raw(`{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"again":{"$ref":"#"}}}}}`),
			OutputSchema: raw(`{"type":"array","items":{"type":["string","null"]}}`)},
		{Name: "unions", InputSchema: raw(`{"type":"object","properties":{
			"one":{"oneOf":[{"type":"string"},{"type":"number"}]},"any":{"anyOf":[{"type":"string"}]},"all":{"allOf":[{"type":"object"}]},
			"types":{"type":["string","number"]},"maybe":{"type":["integer","null"]},"nothing":false,"everything":true,
			"items":{"type":"array","items":false},"map":{"type":"object","additionalProperties":{"type":"integer"}},
			"null":{"type":"null"},"weird":{"type":"weird"}},"required":["maybe","null"]}`)},
		{Name: "alternatives", InputSchema: raw(`{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"},
			"by":{"type":"object","properties":{"x":{"type":"number"}},"oneOf":[{"required":["x"]}]}},"anyOf":[{"required":["id"]},{"required":["name"]}]}`)},
		{Name: "scalar input", InputSchema: raw(`{"type":"string"}`)},
		{Name: "no schema"},
		{Name: "!!!", InputSchema: raw(`{"type":"object","properties":{"!!!":{"type":"object","properties":{"???":{"type":"string"}}}}}`)},
		{Name: "???", InputSchema: raw(`{"type":"object"}`)},
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Errorf("%s differs from the golden file at line %d (go test -run %s -update rewrites it):\ngot:  %s\nwant: %s", name, i+1, t.Name(), line(g), line(w))
	}
}

// squeeze makes every run of blanks one space.
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
}

var hostileSource = Source{Name: "evil\n// cvm:schema-hash \"x\" 0 server", Server: "npub1evil", Relays: []string{"ws://127.0.0.1:1/\"`"}}

func TestGo_HostileSchemasCompile(t *testing.T) {
	src, err := Go(Options{Package: "hostile", Source: hostileSource, Tools: hostileTools()})
	if err != nil {
		t.Fatal(err)
	}
	if err := typeCheck(t, src); err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	golden(t, "hostile.go.golden", src)
	code := squeeze(string(src)) // gofmt's alignment aside
	for _, want := range []string{
		// Keywords are fields, collisions numbered, the JSON names kept.
		"Type string `json:\"type\"`", "Func int64 `json:\"func\"`", "AB *float64 `json:\"AB,omitempty\"`",
		"AB2 float64 `json:\"a b\"`", "AB3 *float64 `json:\"a-b,omitempty\"`", "Field2 *string `json:\"名前,omitempty\"`",
		"Field3 *string `json:\"日本,omitempty\"`", "N123 *string `json:\"123,omitempty\"`", "Field *string `json:\"-,,omitempty\"`",
		// Names the code declares itself, and method names alike.
		"type ClientInput2 map[string]any", "func (c *Client) Client(", "func (c *Client) Client2(", "func (c *Client) Close2(",
		// What no struct tag can say.
		"type QuotesInput map[string]any",
		// Recursion through pointers, slices and maps; circles refused.
		"Children []RefsNode", "Parent *RefsNode `json:\"parent\"`", "type RefsList []RefsList", "type RefsDict map[string]RefsDict",
		"$ref #/$defs/A refers to itself", "$ref #/$defs/Nope is not followed", "$ref #/properties/node is not followed",
		"Self *RefsInput `json:\"self,omitempty\"`", "type RefsOutput = any", "the schema refers to itself and nothing else",
		"func (c *Client) Wrapped(ctx context.Context, in WrappedArgs) (*WrappedOutput, error)", "type WrappedOutput []string", "Again *WrappedArgs",
		// Enums: constants, spelt out while few, collisions numbered.
		"one of 10000 values", "EnumsInputClashAB EnumsInputClash = \"a-b\"", "EnumsInputClashAB2 EnumsInputClash = \"a_b\"",
		"EnumsInputClashEmpty3 EnumsInputClash = \"*/\"", "EnumsInputOneOnly EnumsInputOne = \"only\"",
		"nested more than 32 levels deep", "the schema is a oneOf", "one of the types string, number",
		"Maybe *int64 `json:\"maybe\"`", "Typed loosely: its anyOf is not checked here.\ntype AlternativesInput struct",
		"Typed loosely: its oneOf is not checked here.\n\tBy *AlternativesInputBy", "Name *string `json:\"name,omitempty\"`", "type ScalarInputInput map[string]any", "type NoSchemaInput map[string]any",
		// Comments cannot end early or hide a hash line.
		`\u2028 line ends, \u0000 and a`, `(evil\u000A// cvm:schema-hash "x" 0 server)`, `\u202Eevil`,
	} {
		if !strings.Contains(code, squeeze(want)) {
			t.Errorf("the code lacks %q", want)
		}
	}
	recorded, err := Recorded(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != len(hostileTools()) || recorded["evil"] != "" || recorded["x"] != "" || recorded["café ☕ \u202Eevil"] == "" {
		t.Errorf("recorded hashes %q", recorded)
	}
}

// The TypeScript of the same tools compiles under tsc --strict, the
// pinned compiler of interop/typescript.
func TestTypeScript_HostileSchemasCompile(t *testing.T) {
	src, err := TypeScript(Options{Package: "hostile", Source: hostileSource, Tools: hostileTools()})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "hostile.ts.golden", src)
	for _, want := range []string{
		`"a b": number;`, `"日本"?: string;`, `"with\"quote"?: string;`, `"new\nline"?: string;`,
		"export class HostileClient", "async constructor2(", "async close2(", "async client2(",
		`"clash"?: EnumsInputClash;`, `export type EnumsInputClash = "a-b" | "a_b" | "A B" | "" | "\u2028" | "*/";`,
		`"parent": RefsNode;`, `export type RefsList = Array<RefsList>;`, `"maybe": number | null;`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the code lacks %q", want)
		}
	}
	tscCheck(t, map[string][]byte{"hostile.ts": src})
}

// tscCheck compiles TypeScript files with the pinned tsc, strict, against
// interop's @contextvm/sdk and MCP SDK.
func tscCheck(t *testing.T, files map[string][]byte) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	tsc := filepath.Join(root, "typescript", "node_modules", ".bin", "tsc")
	for _, p := range []string{tsc, filepath.Join(root, "node_modules", "@contextvm", "sdk")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing; run: make interop-deps", p)
		}
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	out, err := exec.Command(tsc, append([]string{"--noEmit", "--strict", "--target", "ES2022", "--module", "NodeNext",
		"--moduleResolution", "NodeNext", "--skipLibCheck", "--noUnusedLocals"}, filepath.Join(dir, names[0]))...).CombinedOutput()
	if err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}

func TestGo_RefusesWithClearErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		err  error
		msg  string
	}{
		{"external $ref cannot be hashed", Options{Tools: []Tool{{Name: "x", InputSchema: raw(`{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`)}}},
			commonschema.ErrExternalRef, `tool "x"`},
		{"two tools of one name", Options{Tools: []Tool{{Name: "x"}, {Name: "x"}}}, ErrInvalidTool, `two tools are named "x"`},
		{"a schema that is not JSON", Options{Tools: []Tool{{Name: "x", InputSchema: raw(`{`)}}}, ErrInvalidTool, `tool "x"`},
		{"a keyword as package", Options{Package: "func"}, nil, `package name "func"`},
		{"main as package", Options{Package: "main"}, nil, `package name "main"`},
		{"not an identifier", Options{Package: "my-client"}, nil, `package name "my-client"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Go(tc.opts)
			if err == nil || src != nil || !strings.Contains(err.Error(), tc.msg) || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Fatalf("Go = %d bytes, %v; want an error %v saying %q", len(src), err, tc.err, tc.msg)
			}
		})
	}
	// 400 tools of 30 nested objects each: more types than maxTypes.
	many := make([]Tool, 0, 400)
	for i := range 400 {
		many = append(many, Tool{Name: fmt.Sprint("t", i), InputSchema: raw(nested(30))})
	}
	if _, err := Go(Options{Tools: many}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d tools of 30 types each: %v, want ErrTooLarge", len(many), err)
	}
}

func TestCompare(t *testing.T) {
	tools := []Tool{
		{Name: "same", InputSchema: raw(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
		{Name: "changed", InputSchema: raw(`{"type":"object","properties":{"a":{"type":"integer"}}}`)},
		{Name: "added", InputSchema: raw(`{"type":"object"}`)},
	}
	src, err := Go(Options{Tools: []Tool{tools[0],
		{Name: "changed", InputSchema: raw(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
		{Name: "removed", InputSchema: raw(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := Recorded(src)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := Compare(recorded, tools)
	want := []Change{{"added", "added"}, {"changed", "changed"}, {"removed", "removed"}}
	if err != nil || fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Fatalf("Compare = %v, %v; want %v", changes, err, want)
	}
	// Descriptions are not part of the interface.
	tools[0].Description = "now documented"
	if changes, err := Compare(recorded, tools[:1]); err != nil || fmt.Sprint(changes) != fmt.Sprint([]Change{{"changed", "removed"}, {"removed", "removed"}}) {
		t.Fatalf("Compare = %v, %v", changes, err)
	}
	if _, err := Recorded([]byte("package x\n// cvm:schema-hash \"x\" 00\n")); !errors.Is(err, ErrNotGenerated) {
		t.Fatalf("a hash line after the header: %v, want ErrNotGenerated", err)
	}
}

// Hundreds of properties, all X once made identifiers, get fields X,
// X2, X3 …, and the code type-checks.
func TestGo_CrowdedNames(t *testing.T) {
	schema := crowd(800)
	var parsed struct{ Properties map[string]any }
	if err := json.Unmarshal(schema, &parsed); err != nil {
		t.Fatal(err)
	}
	n := len(parsed.Properties)
	src, err := Go(Options{Tools: []Tool{{Name: "crowd", InputSchema: schema}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := typeCheck(t, src); err != nil {
		t.Fatal(err)
	}
	code := string(src)
	if got := strings.Count(code, "`json:"); got != n || !strings.Contains(code, fmt.Sprintf("\tX%d ", n)) || !strings.Contains(code, "\tX ") {
		t.Errorf("%d fields of %d properties, X to X%d:\n%s", got, n, n, code)
	}
}
