package zap_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a processor or a simulator starts ends by the time it
// is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
