package room

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// cvmBinary is the cvm command, built once by TestMain: the crash test runs
// "cvm room serve" in a process of its own, to kill it.
var cvmBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cvm-room-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cvmBinary = filepath.Join(dir, "cvm")
	build := exec.Command("go", "build", "-o", cvmBinary, "../../cmd/cvm")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cvm:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
