package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/cvmgo/cvm/internal/secp"
)

// cvmBinary is the cvm command, built once: the gateway and proxy tests
// drive it as users and MCP hosts do.
var cvmBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cvm-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cvmBinary = filepath.Join(dir, "cvm")
	// The binary gets the crypto backend this test binary was built with,
	// so that "go test -tags libsecp256k1" runs the matrix on the fast build.
	args := []string{"build", "-o", cvmBinary}
	if secp.Backend == "libsecp256k1" {
		args = append(args, "-tags", "libsecp256k1")
	}
	build := exec.Command("go", append(args, "../cmd/cvm")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cvm:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// goleak.VerifyTestMain would exit before the binary is removed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestCVMBinaryCryptoBackend: the cvm the interop tests drive was built
// with the same secp256k1 backend as the tests themselves.
func TestCVMBinaryCryptoBackend(t *testing.T) {
	out, err := exec.Command(cvmBinary, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Crypto string `json:"crypto"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Crypto != secp.Backend {
		t.Fatalf("cvm version --json = %s (%v), want crypto %q", out, err, secp.Backend)
	}
}
