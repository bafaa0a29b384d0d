package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the module's import path (../go.mod).
const modulePath = "github.com/cvmgo/cvm"

// pkg is a package of the module, found in the tree.
type pkg struct {
	dir     string   // relative to the module root, with slashes: its import path less modulePath
	doc     bool     // some file has a package doc comment
	imports []string // what its non-test files import of the module, as dirs
}

// modulePackages walks the module from root for the directories holding
// Go files: testdata, node_modules and hidden directories are not
// packages.
func modulePackages(t *testing.T, root string) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		p := pkgs[rel]
		if p == nil {
			p = &pkg{dir: rel}
			pkgs[rel] = p
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		p.doc = p.doc || f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != ""
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if dep, ok := strings.CutPrefix(ip, modulePath+"/"); ok && !slices.Contains(p.imports, dep) {
				p.imports = append(p.imports, dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// packageTable is the packages named in the first cell of each row of the
// table under "| package | owns |".
func packageTable(t *testing.T, page string) map[string]bool {
	t.Helper()
	_, table, ok := strings.Cut(page, "| package | owns |\n")
	if !ok {
		t.Fatal("architecture.md has no table of packages (| package | owns |)")
	}
	named := map[string]bool{}
	name := regexp.MustCompile("`([^`]+)`")
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			named[m[1]] = true
		}
	}
	return named
}

// Every package of the module has a row of its own in the table of
// docs/architecture.md, saying what it is for, and the table names no
// package that does not exist; every package has a doc comment.
func TestArchitecture_ListsEveryPackage(t *testing.T) {
	pkgs := modulePackages(t, "..")
	if len(pkgs) < 10 || pkgs["cmd/cvm"] == nil || pkgs["contextvm/internal/peertest"] == nil {
		t.Fatalf("found %d packages, not the module's (cmd/cvm and contextvm/internal/peertest among them)", len(pkgs))
	}
	named := packageTable(t, read(t, "architecture.md"))
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		if !named[dir] {
			t.Errorf("package %s is missing from the table of docs/architecture.md: add a row | `%s` | what it is for |", dir, dir)
		}
		if !pkgs[dir].doc {
			t.Errorf("package %s has no doc comment: add a doc.go that says what it is for and how its files fit", dir)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(named)) {
		if pkgs[dir] == nil {
			t.Errorf("docs/architecture.md lists %s, which is no package of the module: remove or rename its row", dir)
		}
	}
}

// The import block of docs/architecture.md says what each library package
// imports of the module (leaving out internal packages), exactly as the
// code does.
func TestArchitecture_ImportsAsTheCodeHasThem(t *testing.T) {
	page := read(t, "architecture.md")
	_, block, ok := strings.Cut(page, "<!-- imports: begin -->\n")
	block, _, ok2 := strings.Cut(block, "<!-- imports: end -->")
	if !ok || !ok2 {
		t.Fatal("architecture.md has no <!-- imports: begin --> … <!-- imports: end --> block")
	}
	drawn := map[string][]string{}
	for line := range strings.Lines(block) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " → ")
		if !ok {
			t.Errorf("architecture.md, imports: %q is not PACKAGE → IMPORTS", strings.TrimSpace(line))
			continue
		}
		drawn[from] = strings.Fields(to)
	}
	pkgs := modulePackages(t, "..")
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		var want []string
		for _, dep := range pkgs[dir].imports {
			if !isInternal(dep) {
				want = append(want, dep)
			}
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(drawn[dir]))
		_, isDrawn := drawn[dir]
		if !isDrawn && (len(want) == 0 || !isLibrary(dir)) {
			continue
		}
		switch {
		case !isDrawn:
			t.Errorf("architecture.md does not draw the imports of %s: add the line    %s → %s", dir, dir, strings.Join(want, " "))
		case !slices.Equal(got, want):
			t.Errorf("architecture.md draws %s → %s; the code has %s → %s", dir, strings.Join(got, " "), dir, strings.Join(want, " "))
		}
	}
	for dir := range drawn {
		if pkgs[dir] == nil {
			t.Errorf("architecture.md draws the imports of %s, which is no package of the module", dir)
		}
	}
}

// isInternal reports a package under an internal directory.
func isInternal(dir string) bool {
	return slices.Contains(strings.Split(dir, "/"), "internal")
}

// isLibrary reports a package whose imports the block must draw: the
// CLI and the library, not internal packages, test helpers (…test),
// examples, benchmarks, interop tests or these pages.
func isLibrary(dir string) bool {
	top, _, _ := strings.Cut(dir, "/")
	switch {
	case isInternal(dir), strings.HasSuffix(dir, "test"):
		return false
	case top == "bench", top == "examples", top == "interop", top == "docs":
		return false
	}
	return true
}
