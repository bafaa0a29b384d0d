package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The test binary is also the upstream of the tests of children_test.go
// (see TestMain, which calls runTestChild first).
const (
	// envDumpEnv names a file to which the process appends its
	// environment, one JSON line, before it serves as the exec-log server
	// (execLogEnv must be set too).
	envDumpEnv = "CVM_TEST_ENVDUMP"
	// forkEnv names a directory. The process starts itself again as the
	// MCP server, on its own stdin, stdout and stderr, and waits for it,
	// as npx starts node.
	forkEnv = "CVM_TEST_FORK"
	// grandchildEnv marks that second process, which holds a lock on
	// DIR/PID.lock (holding "PID PARENT-PID") for as long as it lives,
	// serves, and stays 10 minutes after its input ends (as a server whose
	// timers keep it alive does), ignoring SIGTERM and SIGINT: the worst a
	// process group can hold.
	grandchildEnv = "CVM_TEST_GRANDCHILD"
)

// grandchildLinger bounds how long a leaked grandchild loads the machine.
const grandchildLinger = 10 * time.Minute

// runTestChild runs the process as one of the upstreams above, if the
// environment says so, and does not return then.
func runTestChild() {
	if path := os.Getenv(envDumpEnv); path != "" {
		dumpEnv(path)
	}
	dir := os.Getenv(forkEnv)
	switch {
	case dir == "":
		return
	case os.Getenv(grandchildEnv) == "":
		os.Exit(runForkParent())
	default:
		runGrandchild(dir)
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

func runForkParent() int {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), grandchildEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runGrandchild(dir string) {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(os.Getpid())+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(f, "%d %d\n", os.Getpid(), os.Getppid())
	execLogServer(os.DevNull).Run(context.Background(), &mcp.StdioTransport{})
	// Lingering is the behaviour under test: a server whose timers keep
	// it alive after its input ended, which the gateway must not leak.
	time.Sleep(grandchildLinger)
	runtime.KeepAlive(f) // the lock lives as long as the file is open
	os.Exit(0)
}

// grandchild is one process started by a forkEnv upstream, known by its
// lock file.
type grandchild struct {
	lock      string
	pid, ppid int
}

// grandchildren lists the grandchildren that ever ran with dir, in no
// particular order. Each is serving, and so holding its lock, by the time
// its server answered initialize.
func grandchildren(t *testing.T, dir string) []grandchild {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var out []grandchild
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		g := grandchild{lock: p}
		if _, err := fmt.Sscan(string(b), &g.pid, &g.ppid); err != nil {
			continue // created, not yet written: not serving yet
		}
		out = append(out, g)
	}
	return out
}

// alive reports whether the grandchild still holds its lock: a process
// that exited holds none, zombie or not, and a process that took its pid
// since never held it.
func (g grandchild) alive(t *testing.T) bool {
	t.Helper()
	f, err := os.Open(g.lock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// living are those of gs still alive.
func living(t *testing.T, gs []grandchild) []grandchild {
	var out []grandchild
	for _, g := range gs {
		if g.alive(t) {
			out = append(out, g)
		}
	}
	return out
}

// awaitGrandchildren polls dir until cond holds for its grandchildren,
// failing after a generous deadline.
func awaitGrandchildren(t *testing.T, dir, what string, cond func([]grandchild) bool) []grandchild {
	t.Helper()
	var gs []grandchild
	if !testwait.Until(t.Context(), 30*time.Second, func() bool {
		gs = grandchildren(t, dir)
		return cond(gs)
	}) {
		t.Fatalf("%s: after %v, grandchildren %v, alive %v", what, testwait.Timeout(30*time.Second), gs, living(t, gs))
	}
	return gs
}

// awaitNoneAlive waits until no grandchild of dir is alive.
func awaitNoneAlive(t *testing.T, dir, what string) {
	t.Helper()
	awaitGrandchildren(t, dir, what, func(gs []grandchild) bool { return len(living(t, gs)) == 0 })
}

// forkDir is a directory for the grandchildren of a forkEnv upstream;
// whatever of them is still alive when the test ends is killed, so that a
// failing test leaks nothing.
func forkDir(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, g := range living(t, grandchildren(t, dir)) {
			syscall.Kill(g.pid, syscall.SIGKILL)
		}
	})
	return dir
}

func (g grandchild) String() string {
	return strings.TrimSuffix(filepath.Base(g.lock), ".lock")
}
