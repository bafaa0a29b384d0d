package cvmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/internal/secp"
)

// CVM is the import path of the cvm command.
const CVM = "github.com/cvmgo/cvm/cmd/cvm"

// Build holds the commands a test package builds, each compiled on first
// use into one temporary directory. The zero value is ready; the package's
// TestMain removes the directory after its tests (see Main). Safe for
// concurrent use: parallel tests asking for the same command wait for the
// one build.
type Build struct {
	mu    sync.Mutex
	dir   string
	paths map[string]string // import path -> executable
}

// Path returns the executable built from the main package pkg (an import
// path), building it on first use; a build that fails fails t.
func (b *Build) Path(t testing.TB, pkg string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.paths[pkg]; ok {
		return p
	}
	if b.dir == "" {
		dir, err := os.MkdirTemp("", "cvmtest-")
		if err != nil {
			t.Fatal(err)
		}
		b.dir, b.paths = dir, map[string]string{}
	}
	// One subdirectory per package: two main packages may share a name
	// ("cmd").
	out := filepath.Join(b.dir, strings.ReplaceAll(pkg, "/", "_"), filepath.Base(pkg))
	// Tag cvmtest compiles in what only tests may switch on (the
	// outbound fetcher's trust of their loopback servers, see
	// cmd/cvm/outboundtrust_cvmtest.go).
	tags := "cvmtest"
	if secp.Backend == "libsecp256k1" {
		tags += ",libsecp256k1"
	}
	args := []string{"build", "-o", out, "-tags", tags}
	build := exec.Command("go", append(args, pkg)...)
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, msg)
	}
	b.paths[pkg] = out
	return out
}

// CVM is Path(t, CVM): the cvm binary.
func (b *Build) CVM(t testing.TB) string {
	t.Helper()
	return b.Path(t, CVM)
}

// Remove deletes what was built. The Build is ready for use again.
func (b *Build) Remove() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" {
		return nil
	}
	err := os.RemoveAll(b.dir)
	b.dir, b.paths = "", nil
	if err != nil {
		return fmt.Errorf("removing the test binaries: %w", err)
	}
	return nil
}
