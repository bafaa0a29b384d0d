package interop

import (
	"encoding/json"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/secp"
)

// build holds the cvm command, built on first use with the crypto backend
// this test binary was built with, so that "go test -tags libsecp256k1"
// runs the matrix on the fast build: the gateway and proxy tests drive it
// as users and MCP hosts do.
var build cvmtest.Build

func TestMain(m *testing.M) { cvmtest.Main(m, &build) }

// TestCVMBinaryCryptoBackend: the cvm the interop tests drive was built
// with the same secp256k1 backend as the tests themselves.
func TestCVMBinaryCryptoBackend(t *testing.T) {
	code, out, errOut := cvmtest.Run(t, build.CVM(t), cvmtest.Options{}, "version", "--json")
	if code != 0 {
		t.Fatalf("cvm version --json: exit %d; stderr: %s", code, errOut)
	}
	var v struct {
		Crypto string `json:"crypto"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Crypto != secp.Backend {
		t.Fatalf("cvm version --json = %s (%v), want crypto %q", out, err, secp.Backend)
	}
}
