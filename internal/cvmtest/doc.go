// Package cvmtest runs built commands from tests, as users and MCP hosts
// run them: the cvm binary first of all, and the peers the tests drive
// beside it (Node scripts, the demo server).
//
// Build compiles a main package on first use, once per test binary, with
// the crypto backend of the test binary itself (package secp), so that
// "go test -tags libsecp256k1" tests the fast build end to end, and with
// tag cvmtest, which compiles in the test-only trust of loopback servers
// that cvm's outbound fetcher takes from $CVM_TEST_OUTBOUND_ALLOW and
// $CVM_TEST_OUTBOUND_CA (never in a release build). Start runs
// a program with the environment, directory and arguments a test gives,
// collects its stderr, and reads its stdout, where a long-running command
// prints one JSON line when it is ready (ReadyLine), and what it answers a
// line at a time (Line); the test stops it with a signal and waits (Stop),
// or the test's end kills it. Run runs a one-shot command to its end. Main
// is the TestMain of a package that builds: it removes the binaries and
// checks for leaked goroutines.
//
// Every wait is on a condition (a line printed, the process gone), bounded
// by a generous deadline scaled by internal/testwait's knob.
//
// Files: build.go (Build), proc.go (Start, Proc, Run), main.go (Main).
package cvmtest
