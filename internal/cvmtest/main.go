package cvmtest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs m's tests and exits with their status: after them, it runs
// atEnd (e.g. closing a browser the tests shared), fails the run when the
// tests passed but left goroutines behind, and removes what b built.
// Call it from TestMain.
func Main(m *testing.M, b *Build, atEnd ...func()) {
	code := m.Run()
	for _, f := range atEnd {
		f()
	}
	if code == 0 {
		// goleak.VerifyTestMain would exit before the binaries are removed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if err := b.Remove(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
