package room

import (
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
)

// build holds the cvm command, built on first use: the crash tests run
// "cvm room serve" in a process of its own, to kill it.
var build cvmtest.Build

func TestMain(m *testing.M) { cvmtest.Main(m, &build) }
