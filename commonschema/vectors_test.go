package commonschema

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// The vectors: testdata/vectors.json holds the tools, testdata/reference.json
// what @contextvm/sdk 0.11.14 computes for them. interop's
// TestCommonSchemaMatchesReference regenerates and checks reference.json
// against the SDK itself; these tests need no Node.

type vector struct {
	ID               string          `json:"id"`
	SameAs           string          `json:"sameAs"`
	CvmError         string          `json:"cvmError"`
	ReferenceRejects bool            `json:"referenceRejects"`
	Tool             json.RawMessage `json:"tool"`
}

type referenceResult struct {
	ID        string `json:"id"`
	Hash      string `json:"hash"`
	Canonical string `json:"canonical"`
	Error     string `json:"error"`
}

func loadVectors(t testing.TB) ([]vector, map[string]referenceResult) {
	t.Helper()
	var file struct{ Vectors []vector }
	readTestdata(t, "testdata/vectors.json", &file)
	var results []referenceResult
	readTestdata(t, "testdata/reference.json", &results)
	ref := make(map[string]referenceResult, len(results))
	for _, r := range results {
		ref[r.ID] = r
	}
	if len(file.Vectors) == 0 || len(ref) != len(file.Vectors) {
		t.Fatalf("%d vectors, %d reference results", len(file.Vectors), len(ref))
	}
	return file.Vectors, ref
}

func readTestdata(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// vectorError is the sentinel a vector's cvmError names.
func vectorError(kind string) error {
	switch kind {
	case "invalid":
		return ErrInvalidTool
	case "external-ref":
		return ErrExternalRef
	}
	return errors.New("unknown cvmError " + kind)
}

// hashVector decodes a vector's tool the way a client decodes a tools/list
// entry and returns its canonical payload and hash.
func hashVector(raw json.RawMessage) (canonical []byte, hash string, err error) {
	var tool Tool
	if err := json.Unmarshal(raw, &tool); err != nil {
		return nil, "", err
	}
	if canonical, err = canonicalPayload(tool); err != nil {
		return nil, "", err
	}
	hash, err = Hash(tool)
	return canonical, hash, err
}

func TestHash_EqualsReferenceOnEveryVector(t *testing.T) {
	vectors, ref := loadVectors(t)
	for _, v := range vectors {
		t.Run(v.ID, func(t *testing.T) {
			r := ref[v.ID]
			canonical, hash, err := hashVector(v.Tool)
			if v.CvmError != "" {
				if want := vectorError(v.CvmError); !errors.Is(err, want) {
					t.Fatalf("hash %s, error %v; want %v", hash, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(canonical) != r.Canonical {
				t.Errorf("canonical payload\ncvm       %s\nreference %s", canonical, r.Canonical)
			}
			if hash != r.Hash {
				t.Errorf("hash %s, reference %s", hash, r.Hash)
			}
		})
	}
}

// Vectors marked sameAs differ only in what the hash must not see (member
// order, whitespace, escapes, number spelling, documentation); all the others
// differ in something it must see.
func TestHash_EqualExactlyWhereTheVectorsSaySo(t *testing.T) {
	vectors, _ := loadVectors(t)
	group := map[string]string{}  // vector id → the id of its group
	byHash := map[string]string{} // hash → group
	for _, v := range vectors {
		if v.CvmError != "" {
			continue
		}
		_, hash, err := hashVector(v.Tool)
		if err != nil {
			t.Fatalf("%s: %v", v.ID, err)
		}
		g := v.ID
		if v.SameAs != "" {
			g = group[v.SameAs]
			if g == "" {
				t.Fatalf("%s: sameAs %q, which is not an earlier vector", v.ID, v.SameAs)
			}
		}
		group[v.ID] = g
		switch other, seen := byHash[hash]; {
		case !seen && v.SameAs != "":
			t.Errorf("%s hashes differently from %s", v.ID, v.SameAs)
		case seen && other != g:
			t.Errorf("%s hashes like %s; they must differ", v.ID, other)
		case !seen:
			byHash[hash] = g
		}
	}
}

// The vectors record which refusals are cvm's own (the reference hashes those
// tools) and which the reference shares. Both kinds are reported as errors,
// never as a hash computed from repaired input.
func TestHash_RefusesWhatTheReferenceRefuses(t *testing.T) {
	vectors, ref := loadVectors(t)
	for _, v := range vectors {
		if rejected := ref[v.ID].Error != ""; rejected != v.ReferenceRejects {
			t.Errorf("%s: reference.json says rejected=%v, the vector says %v", v.ID, rejected, v.ReferenceRejects)
		}
		if v.ReferenceRejects && v.CvmError == "" {
			t.Errorf("%s: the reference refuses it, so cvm must too", v.ID)
		}
	}
}
