package interop

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/cvmgo/cvm/commonschema"
)

var update = flag.Bool("update", false, "rewrite the committed reference vectors (commonschema/testdata/reference.json, contextvm/testdata/reference-vectors.json) from what the reference SDK computes")

// The vectors live with the package they test, so that its unit tests run
// without Node; this test proves that the committed results are the
// reference's.
const (
	vectorsFile   = "../commonschema/testdata/vectors.json"
	referenceFile = "../commonschema/testdata/reference.json"
)

type schemaVector struct {
	ID               string          `json:"id"`
	SameAs           string          `json:"sameAs"`
	CvmError         string          `json:"cvmError"`
	ReferenceRejects bool            `json:"referenceRejects"`
	Tool             json.RawMessage `json:"tool"`
}

// cvmErrors maps a vector's cvmError to the sentinel cvm must return.
var cvmErrors = map[string]error{
	"invalid":      commonschema.ErrInvalidTool,
	"external-ref": commonschema.ErrExternalRef,
}

type referenceResult struct {
	ID        string `json:"id"`
	Hash      string `json:"hash,omitempty"`
	Canonical string `json:"canonical,omitempty"`
	Error     string `json:"error,omitempty"`
}

type toolsList struct {
	Tools []json.RawMessage `json:"tools"`
}

// TestCommonSchemaMatchesReference runs @contextvm/sdk's CEP-15 code over the
// vectors and over a small announcement, and requires cvm to agree with it:
// the same hash for every tool cvm accepts, an error wherever the reference
// refuses a tool, the same _meta on annotated tools and the same 11317 tags,
// except where docs/protocol-compatibility.md says cvm differs.
func TestCommonSchemaMatchesReference(t *testing.T) {
	var file struct {
		Vectors []schemaVector `json:"vectors"`
	}
	readJSON(t, vectorsFile, &file)

	ann := announcement(t)
	annPath := filepath.Join(t.TempDir(), "announce.json")
	writeJSON(t, annPath, ann)

	var got struct {
		Vectors         []referenceResult `json:"vectors"`
		CanonicalHashes bool              `json:"canonicalHashes"`
		Annotated       toolsList         `json:"annotated"`
		Tags            [][]string        `json:"tags"`
		Error           string            `json:"error"`
	}
	abs, err := filepath.Abs(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, "commonschema-vectors.mjs", map[string]string{"VECTORS": abs, "ANNOUNCE": annPath}, &got)
	if got.Error != "" {
		t.Fatalf("script: %s", got.Error)
	}
	if !got.CanonicalHashes {
		t.Fatal("the SDK's hash is no longer sha256(canonicalize({name, normalizeSchema(inputSchema), normalizeSchema(outputSchema)?})); the vectors' canonical texts would be wrong")
	}

	t.Run("vectors", func(t *testing.T) {
		if *update {
			writeJSON(t, referenceFile, got.Vectors)
			t.Logf("wrote %s", referenceFile)
		}
		var committed []referenceResult
		readJSON(t, referenceFile, &committed)
		if !reflect.DeepEqual(committed, got.Vectors) {
			t.Fatalf("%s is not what the reference computes; if the vectors changed on purpose, run: go test ./interop -run TestCommonSchemaMatchesReference -update", referenceFile)
		}
		if len(got.Vectors) != len(file.Vectors) {
			t.Fatalf("the reference returned %d results for %d vectors", len(got.Vectors), len(file.Vectors))
		}
		for i, v := range file.Vectors {
			ref := got.Vectors[i]
			if ref.ID != v.ID {
				t.Fatalf("result %d is for %q, want %q", i, ref.ID, v.ID)
			}
			if rejected := ref.Error != ""; rejected != v.ReferenceRejects {
				t.Errorf("%s: the reference rejects it: %v (%s); the vector says %v", v.ID, rejected, ref.Error, v.ReferenceRejects)
			}
			var tool commonschema.Tool
			hash, err := func() (string, error) {
				if err := json.Unmarshal(v.Tool, &tool); err != nil {
					return "", err
				}
				return commonschema.Hash(tool)
			}()
			switch {
			case v.CvmError == "" && err != nil:
				t.Errorf("%s: cvm: %v; the reference hashes it to %s", v.ID, err, ref.Hash)
			case v.CvmError == "" && hash != ref.Hash:
				t.Errorf("%s: cvm %s, reference %s (canonical %s)", v.ID, hash, ref.Hash, ref.Canonical)
			case v.CvmError != "" && !errors.Is(err, cvmErrors[v.CvmError]):
				t.Errorf("%s: cvm: hash %s, error %v; want %v", v.ID, hash, err, cvmErrors[v.CvmError])
			case v.CvmError != "" && !v.ReferenceRejects:
				t.Logf("%s: documented difference: cvm refuses it (%v); the reference hashes it to %s", v.ID, err, ref.Hash)
			}
		}
	})

	t.Run("annotate", func(t *testing.T) {
		if len(got.Annotated.Tools) != len(ann.Tools) {
			t.Fatalf("the reference returned %d tools for %d", len(got.Annotated.Tools), len(ann.Tools))
		}
		for i, tool := range ann.Tools {
			var named struct{ Name string }
			if err := json.Unmarshal(tool, &named); err != nil {
				t.Fatal(err)
			}
			ref := got.Annotated.Tools[i]
			if !slices.Contains(ann.Common, named.Name) {
				if !sameJSON(t, ref, tool) {
					t.Errorf("%s is not declared common, yet the reference changed it: %s", named.Name, ref)
				}
				continue
			}
			mine, hash, err := commonschema.Annotate(tool)
			if err != nil {
				t.Fatalf("%s: %v", named.Name, err)
			}
			if named.Name == staleTool {
				// The documented difference: the reference keeps a claim it
				// finds, cvm writes the hash the schemas produce.
				if claim, _ := commonschema.Claimed(ref); claim != staleHash {
					t.Errorf("the reference replaced a stale claim with %s; update docs/protocol-compatibility.md", claim)
				}
				if claim, _ := commonschema.Claimed(mine); claim != hash || hash == staleHash {
					t.Errorf("cvm annotated the stale tool with %s, want the computed %s", claim, hash)
				}
				continue
			}
			if !sameJSON(t, mine, ref) {
				t.Errorf("%s annotated:\ncvm       %s\nreference %s", named.Name, mine, ref)
			}
		}
	})

	t.Run("tags", func(t *testing.T) {
		var declared []commonschema.ToolHash
		for _, tool := range ann.Tools {
			var tt commonschema.Tool
			if err := json.Unmarshal(tool, &tt); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(ann.Common, tt.Name) {
				continue
			}
			hash, err := commonschema.Hash(tt)
			if err != nil {
				t.Fatal(err)
			}
			if tt.Name == staleTool {
				hash = staleHash // the reference announces the claim it kept (see annotate)
			}
			declared = append(declared, commonschema.ToolHash{Name: tt.Name, Hash: hash})
		}
		var mine [][]string
		for _, tag := range commonschema.Tags(declared, ann.Categories) {
			mine = append(mine, tag)
		}
		if !reflect.DeepEqual(mine, got.Tags) {
			t.Errorf("tags:\ncvm       %q\nreference %q", mine, got.Tags)
		}
	})
}

const (
	staleTool = "stale_tool"
	staleHash = "deadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeef"
)

type announceInput struct {
	Tools      []json.RawMessage `json:"tools"`
	Common     []string          `json:"common"`
	Categories []string          `json:"categories"`
}

// announcement is a tools/list result with tools that exercise what a server
// does to the tools it declares common: other _meta entries and namespace
// fields kept, an existing right claim, a stale claim, a tool not declared
// common, and categories that need trimming and de-duplication.
func announcement(t *testing.T) announceInput {
	t.Helper()
	right, err := commonschema.Hash(commonschema.Tool{Name: "claimed", InputSchema: json.RawMessage(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return announceInput{
		Tools: []json.RawMessage{
			json.RawMessage(`{"name":"get_weather","description":"Weather <b>now</b> & later","inputSchema":{"type":"object","properties":{"location":{"type":"string","description":"City"}},"required":["location"]},"outputSchema":{"type":"object","properties":{"temperature":{"type":"number"}}},"_meta":{"other/ns":{"a":1},"io.contextvm/common-schema":{"note":"kept"}}}`),
			json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`),
			json.RawMessage(`{"name":"translate_text","inputSchema":{"type":"object","properties":{"text":{"type":"string"},"target_language":{"type":"string"}},"required":["text","target_language"]},"annotations":{"readOnlyHint":true}}`),
			json.RawMessage(`{"name":"claimed","inputSchema":{"type":"object"},"_meta":{"io.contextvm/common-schema":{"schemaHash":"` + right + `"}}}`),
			json.RawMessage(`{"name":"` + staleTool + `","inputSchema":{"type":"object","properties":{"v":{"type":"integer"}}},"_meta":{"io.contextvm/common-schema":{"schemaHash":"` + staleHash + `"}}}`),
			json.RawMessage(`{"name":"meta_not_object","inputSchema":{"type":"object"},"_meta":{"io.contextvm/common-schema":"not an object"}}`),
		},
		Common:     []string{"get_weather", "translate_text", "claimed", staleTool, "meta_not_object", "not_listed"},
		Categories: []string{" weather ", "weather", "", "  ", "translation", "\ufefftranslation", "\u0085nel", "Weather"},
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(data []byte) any {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}
