package nwc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a service, client or pool starts ends by the time they
// are closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
