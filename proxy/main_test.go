package proxy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Serve and Pipe end every goroutine they start before they return.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
