package room

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash tests run a gateway in a process of its own, to kill it:
	// this binary, started again with a data directory in the environment.
	if dir := os.Getenv(childGatewayEnv); dir != "" {
		os.Exit(serveChildGateway(dir))
	}
	goleak.VerifyTestMain(m)
}
