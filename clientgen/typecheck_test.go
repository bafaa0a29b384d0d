package clientgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// exports maps the import paths generated Go uses (and what they import)
// to their compiled export data, listed once per test binary: type-checking
// generated code against them costs milliseconds, so that fuzzing can do
// it on every input.
var exports = sync.OnceValues(func() (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export",
		"context", "encoding/json", "errors", "fmt", "net/http", "strings",
		"github.com/cvmgo/cvm/contextvm", "github.com/modelcontextprotocol/go-sdk/mcp")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w: %s", err, stderr.String())
	}
	m := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		m[p.ImportPath] = p.Export
	}
	return m, nil
})

// typeCheck parses and type-checks one generated Go file, as the compiler
// would.
func typeCheck(t testing.TB, src []byte) error {
	t.Helper()
	exp, err := exports()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "client.go", src, parser.ParseComments|parser.AllErrors)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exp[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	conf := types.Config{Importer: imp}
	if _, err := conf.Check("client", fset, []*ast.File{f}, nil); err != nil {
		return fmt.Errorf("type-check: %w", err)
	}
	return nil
}
