package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
)

// Nothing is built through cvmtest here (run builds what the paid calls
// run, as the command does); Main checks that no test leaves a goroutine
// behind.
func TestMain(m *testing.M) { cvmtest.Main(m, &cvmtest.Build{}) }

// testRoot is the repository's root, where interop/ is; it fails (not
// skips) when the pinned Node packages are missing, as the interop tests
// do: a skip would hide that the benchmark was not run.
func testRoot(t *testing.T) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH; the benchmark's reference peers need Node 20 or later")
	}
	if _, err := os.Stat(filepath.Join(root, "interop", "node_modules", "@contextvm", "sdk")); err != nil {
		t.Fatal("interop/node_modules is missing; run: make interop-deps")
	}
	return root
}
