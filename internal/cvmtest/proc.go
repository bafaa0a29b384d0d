package cvmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
)

// The deadlines of the waits below, scaled by testwait.Timeout. Each only
// bounds how long a failing test takes to say so: a command that is ready,
// or exits, ends the wait at once.
const (
	// readyTimeout: a command starting on a busy machine, with -race
	// elsewhere, may take seconds to print its ready line (a gateway
	// starts its upstream and reaches its relays first), or a line it
	// prints after a network round trip.
	readyTimeout = 60 * time.Second
	// exitTimeout: a command ending by itself (a call, a chat at the end
	// of its input) may wait for a network round trip first.
	exitTimeout = 60 * time.Second
	// stopTimeout: a command asked to stop drains what it holds, briefly.
	stopTimeout = 30 * time.Second
	// runTimeout bounds a one-shot command (Run), a Node script included.
	runTimeout = 3 * time.Minute
)

// Options say how Start and Run run a program.
type Options struct {
	// Env is the program's whole environment; nil is the test's own.
	Env []string
	// Dir is its working directory; "" is the test's.
	Dir string
	// Terminal, when set, is the program's stdin, stdout and stderr: a
	// pseudo-terminal's device, whose other side the test reads. Proc's
	// Stdin and Stdout are then nil.
	Terminal *os.File
	// SysProcAttr is given to the process as it is (a session of its
	// own, a controlling terminal).
	SysProcAttr *syscall.SysProcAttr
	// Stdin is what Run gives the program on its standard input; nil is
	// nothing. (A program Start runs reads Proc.Stdin.)
	Stdin io.Reader
}

// Proc is a program a test started. The test's end kills it, if it still
// runs, and waits for it to be gone.
type Proc struct {
	Cmd *exec.Cmd
	// Stdin is the program's standard input.
	Stdin io.WriteCloser
	// Stdout reads what it prints, to the last byte, even after it exited.
	Stdout *bufio.Reader
	// Stderr collects what it logs.
	Stderr *waitbuf.Buffer
	done   chan struct{} // closed once the process has exited
}

// Start runs the program at path with args; see Options. A program that
// cannot start fails t.
func Start(t testing.TB, path string, o Options, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env, cmd.Dir, cmd.SysProcAttr = o.Env, o.Dir, o.SysProcAttr
	p := &Proc{Cmd: cmd, Stderr: &waitbuf.Buffer{}, done: make(chan struct{})}
	var outR, outW *os.File
	if o.Terminal != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Terminal, o.Terminal, o.Terminal
	} else {
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		// A pipe of the test's own rather than StdoutPipe: Wait closes
		// that one when the process exits, and a line printed just before
		// would be lost to a reader that had not read it yet.
		if outR, outW, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = outW, p.Stderr
		p.Stdin, p.Stdout = in, bufio.NewReader(outR)
	}
	err := cmd.Start()
	if outW != nil {
		outW.Close() // the child has its own copy
	}
	if err != nil {
		if outR != nil {
			outR.Close()
		}
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if outR != nil {
			// Also ends a read that a grandchild holding the pipe would
			// keep waiting.
			outR.Close()
		}
	})
	return p
}

// name is the program and its first argument, for messages: "cvm gateway".
func (p *Proc) name() string {
	name := filepath.Base(p.Cmd.Path)
	if len(p.Cmd.Args) > 1 {
		name += " " + p.Cmd.Args[1]
	}
	return name
}

// ReadyLine reads the next line the program prints, the one JSON line a
// long-running command prints when it is ready, into v. A line that is not
// JSON, an exit first, or no line within the deadline fails t.
func (p *Proc) ReadyLine(t testing.TB, v any) {
	t.Helper()
	line := p.Line(t)
	if err := json.Unmarshal([]byte(line), v); err != nil {
		t.Fatalf("%s: ready line %q: %v; stderr: %s", p.name(), line, err, p.Stderr)
	}
}

// Line returns the next line the program prints, "\n" included, or what
// it printed last before its output ended ("" if nothing). No line within
// the deadline fails t.
func (p *Proc) Line(t testing.TB) string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		line, _ := p.Stdout.ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		return line
	case <-time.After(testwait.Timeout(readyTimeout)):
		t.Fatalf("%s: no line on stdout within %v; stderr: %s", p.name(), testwait.Timeout(readyTimeout), p.Stderr)
		return ""
	}
}

// Done is closed once the program has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode is the program's exit code, once Done is closed; -1 when a
// signal ended it.
func (p *Proc) ExitCode() int { return p.Cmd.ProcessState.ExitCode() }

// Wait returns the exit code once the program has exited by itself; one
// still running after the deadline fails t.
func (p *Proc) Wait(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(testwait.Timeout(exitTimeout)):
		t.Fatalf("%s did not exit within %v; stderr: %s", p.name(), testwait.Timeout(exitTimeout), p.Stderr)
	}
	return p.ExitCode()
}

// Stop sends sig and returns the exit code; a program that lingers past
// the deadline fails t.
func (p *Proc) Stop(t testing.TB, sig os.Signal) int {
	t.Helper()
	p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(testwait.Timeout(stopTimeout)):
		t.Fatalf("%s did not exit within %v of %v; stderr: %s", p.name(), testwait.Timeout(stopTimeout), sig, p.Stderr)
	}
	return p.ExitCode()
}

// Terminate sends sig, kills the program if it has not exited within
// grace (scaled), and returns once it is gone: a stop where lingering is
// no failure of the test.
func (p *Proc) Terminate(sig os.Signal, grace time.Duration) {
	p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(testwait.Timeout(grace)):
		p.Kill()
	}
}

// Kill sends SIGKILL and returns once the program is gone.
func (p *Proc) Kill() {
	p.Cmd.Process.Kill()
	<-p.done
}

// Run runs the program at path with args to its end and returns its exit
// code and output. A program that cannot start, or has not ended within
// the deadline (it is killed), fails t.
func Run(t testing.TB, path string, o Options, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := testwait.Context(t, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env, cmd.Dir, cmd.SysProcAttr = o.Env, o.Dir, o.SysProcAttr
	// A grandchild left holding stdout must not keep Run waiting.
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not end within %v; stdout: %s; stderr: %s", filepath.Base(path), args, testwait.Timeout(runTimeout), &out, &errb)
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}
