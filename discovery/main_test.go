package discovery_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Fetch, Watch and Call leave nothing running once they return.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
