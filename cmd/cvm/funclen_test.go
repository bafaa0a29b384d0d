package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the CLI, from its func line to its
// closing brace: the CLI parses flags and wires packages together, and a
// function longer than this holds logic that belongs in a library, or
// several steps that want names of their own.
const maxFuncLines = 80

// TestCLI_FunctionsStayShort keeps every non-test function of cmd/cvm at
// most maxFuncLines long.
func TestCLI_FunctionsStayShort(t *testing.T) {
	for _, f := range longFuncs(t, ".", maxFuncLines) {
		t.Errorf("%s is %d lines long, more than %d: move its logic into a library or split it into named steps", f.name, f.lines, maxFuncLines)
	}
}

// TestCLI_LongFuncsFindsALongFunction proves the check above can fail: a
// function one line over the limit is named with its length.
func TestCLI_LongFuncsFindsALongFunction(t *testing.T) {
	dir := t.TempDir()
	src := "package main\n\nfunc long() {\n" + strings.Repeat("\tprintln()\n", maxFuncLines-1) + "}\n\nfunc short() {}\n"
	for name, body := range map[string]string{
		"long.go":      src,
		"long_test.go": "package main\n\nfunc longTest() {\n" + strings.Repeat("\tprintln()\n", 2*maxFuncLines) + "}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := longFuncs(t, dir, maxFuncLines)
	if len(got) != 1 || got[0].name != "long.go: long" || got[0].lines != maxFuncLines+1 {
		t.Fatalf("long functions %+v, want long.go: long of %d lines only", got, maxFuncLines+1)
	}
}

type longFunc struct {
	name  string // file: Recv.Name
	lines int
}

// longFuncs lists the functions of the non-test Go files in dir longer
// than limit lines.
func longFuncs(t *testing.T, dir string, limit int) []longFunc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var long []longFunc
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > limit {
				long = append(long, longFunc{name: filepath.Base(path) + ": " + funcName(fd), lines: n})
			}
		}
	}
	return long
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
