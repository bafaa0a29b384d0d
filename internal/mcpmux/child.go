package mcpmux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// terminateGrace is how long a child gets to exit after its stdin closes,
// and its process group again after SIGTERM, before they are killed.
// Servers exit on end of input; the grace period only matters for one that
// does not, and a relay shutting down should not wait long for it.
const terminateGrace = 2 * time.Second

// groupPoll is how often a stopping process group is checked for members
// left: there is no way to wait for a group to empty but to ask.
const groupPoll = 10 * time.Millisecond

// child is a stdio MCP server process and the process group it leads.
//
// The child is a program of another party, which may start programs of its
// own: npx starts node, which serves on the pipes npx was given and does
// not exit when npx is signalled. So the child runs in a process group of
// its own, and the group, not the process, is what is stopped: whenever
// the child exits (a restart follows), and when the connection closes.
// Signalling only the child would leave the rest running, and holding the
// pipes, for ever.
//
// Its pipes are made here, not by exec.Cmd, so that the child's exit is
// seen the moment it happens (Wait copies nothing), while what it wrote
// before exiting can still be read.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File // the write end of the child's stdin
	stdout *os.File // the read end of the child's stdout
	tail   *tailWriter

	exited  chan struct{} // closed when the child has exited; waitErr is set
	waitErr error
	stopped chan struct{} // closed when its group has been stopped after it exited
	copied  chan struct{} // closed when its stderr has been copied to the end
	errPipe *os.File      // the read end of the child's stderr

	stopOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// startChild starts cmd, leading a process group of its own, with pipes
// for stdin and stdout; its stderr goes to stderr and to a tail kept for
// error messages.
func startChild(cmd *exec.Cmd, stderr io.Writer) (c *child, err error) {
	var mine, theirs []*os.File // the ends this process keeps, and the child's
	defer func() {
		for _, f := range theirs {
			f.Close() // the child has its own copies
		}
		if err != nil {
			for _, f := range mine {
				f.Close()
			}
		}
	}()
	var pipes [3][2]*os.File // stdin, stdout, stderr: {read, write}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	mine = []*os.File{pipes[0][1], pipes[1][0], pipes[2][0]}
	theirs = []*os.File{pipes[0][0], pipes[1][1], pipes[2][1]}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0][0], pipes[1][1], pipes[2][1]
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c = &child{
		cmd: cmd, stdin: pipes[0][1], stdout: pipes[1][0], errPipe: pipes[2][0],
		tail:   &tailWriter{},
		exited: make(chan struct{}), stopped: make(chan struct{}), copied: make(chan struct{}),
	}
	go c.copyStderr(stderr)
	go c.wait()
	return c, nil
}

// wait reaps the child and stops what it leaves behind in its group.
func (c *child) wait() {
	c.waitErr = c.cmd.Wait()
	close(c.exited)
	c.stopGroup()
	close(c.stopped)
}

func (c *child) copyStderr(w io.Writer) {
	defer close(c.copied)
	io.Copy(io.MultiWriter(w, c.tail), c.errPipe)
}

// stopGroup ends every process of the child's group: SIGTERM, then SIGKILL
// to those left after terminateGrace. It returns when the group is empty,
// or has had terminateGrace to die of SIGKILL (an orphan stays a zombie
// until its new parent reaps it, and still counts as a member meanwhile).
// Concurrent calls wait for the first.
func (c *child) stopGroup() {
	c.stopOnce.Do(func() {
		pid := c.cmd.Process.Pid
		if !signalGroup(pid, syscall.SIGTERM) {
			return // nobody left
		}
		if awaitGroup(pid, terminateGrace) {
			return
		}
		signalGroup(pid, syscall.SIGKILL)
		awaitGroup(pid, terminateGrace)
	})
}

// awaitGroup reports whether the group pid leads empties within d.
func awaitGroup(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for signalGroup(pid, 0) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(groupPoll)
	}
	return true
}

func (c *child) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close stops the child as the MCP specification asks, closing its stdin
// and giving it terminateGrace to exit, and then its whole group (see
// stopGroup). It reports the child's exit status with its last line on
// stderr, which is usually the reason it exited.
func (c *child) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *child) close() error {
	c.stdin.Close()
	t := time.NewTimer(terminateGrace)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
	}
	c.stopGroup()
	t.Reset(terminateGrace)
	select {
	case <-c.stopped:
	case <-t.C:
		// Not even SIGKILL ended it (a process stuck in the kernel): the
		// waiting goroutine is left to reap it whenever it goes.
		c.stdout.Close()
		c.errPipe.Close()
		return fmt.Errorf("%s did not exit after SIGKILL", c.cmd.Path)
	}
	// The group is gone, and its ends of the pipes with it, unless a
	// process left the group holding one: then it is closed from here.
	c.stdout.Close()
	t.Reset(terminateGrace)
	select {
	case <-c.copied:
	case <-t.C:
		c.errPipe.Close()
		<-c.copied
	}
	c.errPipe.Close()
	var exit *exec.ExitError
	if errors.As(c.waitErr, &exit) {
		if line := c.tail.lastLine(); line != "" {
			return fmt.Errorf("%w; its last words on stderr: %q", c.waitErr, line)
		}
	}
	return c.waitErr
}
