package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/commonschema"
)

// runStdin is c.run with the given standard input.
func (c *cli) runStdin(stdin string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, env{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string { return c.env[k] },
	})
	return code, out.String(), errb.String()
}

const (
	weatherJSON = `{"name":"get_weather","inputSchema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]},"outputSchema":{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}}`
	// What @contextvm/sdk computes for weatherJSON (the "weather" vector in
	// commonschema/testdata, checked against the SDK by the interop tests).
	weatherHash = "cd9ff6d0cfdafbedb54e254ca249813f45eb5ae891a91b1e2f94f212f7bb0922"
	echoJSON    = `{"name":"echo","description":"Echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hashOf(t *testing.T, tool string) string {
	t.Helper()
	var tt commonschema.Tool
	if err := json.Unmarshal([]byte(tool), &tt); err != nil {
		t.Fatal(err)
	}
	h, err := commonschema.Hash(tt)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestSchemaHash_OneToolPrintsTheBareHash(t *testing.T) {
	c := newCLI(t)
	file := writeFile(t, weatherJSON)
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"file", "", []string{"schema", "hash", file}},
		{"stdin -", weatherJSON, []string{"schema", "hash", "-"}},
		{"stdin by default", weatherJSON, []string{"schema", "hash"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := c.runStdin(tc.stdin, tc.args...)
			if code != 0 || out != weatherHash+"\n" || errOut != "" {
				t.Fatalf("code %d, stdout %q, stderr %q; want 0 and %s", code, out, errOut, weatherHash)
			}
		})
	}
}

// A full tool object, as a tools/list result carries it, hashes like its
// definition: description, title, annotations and _meta are not hashed.
func TestSchemaHash_IgnoresOtherMembers(t *testing.T) {
	c := newCLI(t)
	full := `{"name":"get_weather","title":"Weather","description":"Current weather","annotations":{"readOnlyHint":true},` +
		`"inputSchema":{"type":"object","properties":{"location":{"type":"string","description":"City"}},"required":["location"]},` +
		`"outputSchema":{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]},` +
		`"_meta":{"io.contextvm/common-schema":{"schemaHash":"0000"}}}`
	code, out, errOut := c.runStdin(full, "schema", "hash")
	if code != 0 || out != weatherHash+"\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSchemaHash_ToolsListPrintsHashAndName(t *testing.T) {
	c := newCLI(t)
	want := weatherHash + " get_weather\n" + hashOf(t, echoJSON) + " echo\n"
	for name, input := range map[string]string{
		"tools/list result": `{"tools":[` + weatherJSON + `,` + echoJSON + `],"nextCursor":"x"}`,
		"JSON-RPC response": `{"jsonrpc":"2.0","id":3,"result":{"tools":[` + weatherJSON + `,` + echoJSON + `]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := c.runStdin(input, "schema", "hash", writeFile(t, input))
			if code != 0 || out != want {
				t.Fatalf("code %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
			}
		})
	}
	code, out, _ := c.runStdin(`{"tools":[]}`, "schema", "hash")
	if code != 0 || out != "" {
		t.Fatalf("an empty list: code %d, stdout %q", code, out)
	}
}

func TestSchemaHash_JSON(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		name, input string
		want        []commonschema.ToolHash
	}{
		{"one tool", weatherJSON, []commonschema.ToolHash{{Name: "get_weather", Hash: weatherHash}}},
		{"tools/list", `{"tools":[` + echoJSON + `,` + weatherJSON + `]}`,
			[]commonschema.ToolHash{{Name: "echo", Hash: hashOf(t, echoJSON)}, {Name: "get_weather", Hash: weatherHash}}},
		{"empty tools/list", `{"tools":[]}`, []commonschema.ToolHash{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := c.runStdin(tc.input, "schema", "hash", "--json")
			if code != 0 {
				t.Fatalf("code %d, stderr %q", code, errOut)
			}
			var got []map[string]string
			if err := json.Unmarshal([]byte(out), &got); err != nil || strings.Count(out, "\n") != 1 {
				t.Fatalf("stdout %q is not one line of JSON: %v", out, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i, w := range tc.want {
				if got[i]["name"] != w.Name || got[i]["schemaHash"] != w.Hash || len(got[i]) != 2 {
					t.Errorf("entry %d: %v, want name %s, schemaHash %s", i, got[i], w.Name, w.Hash)
				}
			}
		})
	}
}

// cvm hashes as the reference does, which leaves out a property named title;
// it says so, on stderr, and still prints the hash.
func TestSchemaHash_WarnsAboutPropertiesTheHashLeavesOut(t *testing.T) {
	c := newCLI(t)
	tool := `{"name":"create_note","inputSchema":{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}}}}`
	withoutTitle := `{"name":"create_note","inputSchema":{"type":"object","properties":{"body":{"type":"string"}}}}`
	code, out, errOut := c.runStdin(tool, "schema", "hash")
	if code != 0 || out != hashOf(t, withoutTitle)+"\n" {
		t.Fatalf("code %d, stdout %q; want the hash of the tool without its title property", code, out)
	}
	if !strings.Contains(errOut, `warning: tool "create_note": /inputSchema/properties/title is not covered by the schema hash`) {
		t.Errorf("stderr %q: no warning about the title property", errOut)
	}
	if _, _, errOut := c.runStdin(weatherJSON, "schema", "hash"); errOut != "" {
		t.Errorf("a warning for an ordinary tool: %q", errOut)
	}
}

func TestSchemaHash_BadInputExits2(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		name, input string
		args        []string
		want        string
	}{
		{"invalid JSON", `{"name":`, nil, "stdin: invalid JSON"},
		{"empty input", ``, nil, "stdin: invalid JSON"},
		{"not an object", `["get_weather"]`, nil, "want a tool definition"},
		{"null", `null`, nil, "want a tool definition"},
		{"missing name", `{"inputSchema":{}}`, nil, "missing name"},
		{"name not a string", `{"name":1,"inputSchema":{}}`, nil, "name is not a string"},
		{"missing inputSchema", `{"name":"a"}`, nil, "missing inputSchema"},
		{"inputSchema not an object", `{"name":"a","inputSchema":"object"}`, nil, "inputSchema is not a JSON object"},
		{"external $ref", `{"name":"a","inputSchema":{"properties":{"x":{"$ref":"https://example.com/x.json"}}}}`, nil,
			`external $ref (resolve it before hashing): "https://example.com/x.json" at /inputSchema/properties/x/$ref`},
		{"lone surrogate", `{"name":"a","inputSchema":{"enum":["\ud800"]}}`, nil, `lone UTF-16 surrogate \ud800`},
		{"duplicate member", `{"name":"a","inputSchema":{"type":"object","type":"string"}}`, nil, "Duplicate key"},
		{"number out of range", `{"name":"a","inputSchema":{"maximum":1e400}}`, nil, "out of range"},
		{"tools not an array", `{"tools":{"name":"a"}}`, nil, `"tools" is not an array`},
		{"a bad tool in a list", `{"tools":[` + echoJSON + `,{"name":"b"}]}`, nil, "stdin: tools[1]: invalid tool definition: missing inputSchema"},
		{"a list item not an object", `{"tools":[7]}`, nil, "stdin: tools[0]: invalid tool definition: not a JSON object"},
		{"missing file", ``, []string{filepath.Join(t.TempDir(), "nope.json")}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := c.runStdin(tc.input, append([]string{"schema", "hash"}, tc.args...)...)
			if code != exitLocal || out != "" {
				t.Fatalf("code %d, stdout %q, stderr %q; want 2 and nothing on stdout", code, out, errOut)
			}
			if !strings.HasPrefix(errOut, "cvm: ") || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q; want one line saying %q", errOut, tc.want)
			}
		})
	}
}

func TestSchema_UnknownSubcommandExits2(t *testing.T) {
	c := newCLI(t)
	if code, out, errOut := c.run("schema", "bogus"); code != exitLocal || out != "" || !strings.Contains(errOut, "bogus") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
}
