package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// The test binary is also the upstream of the tests of children_test.go
// (see TestMain, which calls runTestChild first).
const (
	// envDumpEnv names a file to which the process appends its
	// environment, one JSON line, before it serves as the exec-log server
	// (execLogEnv must be set too).
	envDumpEnv = "CVM_TEST_ENVDUMP"
)

// runTestChild runs the process as one of the upstreams above, if the
// environment says so.
func runTestChild() {
	if path := os.Getenv(envDumpEnv); path != "" {
		dumpEnv(path)
	}
}

func dumpEnv(path string) {
	line, _ := json.Marshal(os.Environ())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f.Write(append(line, '\n')) // one write(2) with O_APPEND: lines never interleave
	f.Close()
}
