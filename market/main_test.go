package market_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The market's calls leave nothing running once they return.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
