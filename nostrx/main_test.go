package nostrx_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a pool starts ends by the time Close returns; goleak
// checks that nothing a test started is left when the tests are over.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
