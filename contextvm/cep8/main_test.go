package cep8

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every one that a
// gated server starts ends by the time its Close returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
