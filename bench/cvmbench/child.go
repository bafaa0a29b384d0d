package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds the wait for a peer's ready line: a gateway starts
// its upstream and reaches its relay first, and Node loads the SDK.
const readyTimeout = 60 * time.Second

// child is a process the benchmark runs a peer in: cvm relay, cvm
// wallet-sim, cvm gateway, a reference server in Node. Its stderr is kept
// (the last few KiB) for the error that says why it failed.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *tail
	done   chan struct{} // closed once the process has exited
}

// startChild starts path with args in dir (the benchmark's own when ""),
// with the environment env (the benchmark's own when nil).
func startChild(name, dir, path string, env []string, args ...string) (*child, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir, cmd.Env = dir, env
	c := &child{name: name, cmd: cmd, stderr: &tail{max: 8 << 10}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	// A pipe of our own rather than StdoutPipe: Wait closes that one when
	// the process exits, and its ready line could be lost to a reader that
	// had not read it yet.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close() // the child has its own copy
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c.stdout = bufio.NewReader(r)
	go func() {
		cmd.Wait()
		r.Close()
		close(c.done)
	}()
	return c, nil
}

// ready decodes the one JSON line the peer prints when it is ready into v.
func (c *child) ready(ctx context.Context, v any) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	lines := make(chan string, 1)
	go func() {
		line, _ := c.stdout.ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), v); err != nil {
			return fmt.Errorf("%s: ready line %q: %v; stderr: %s", c.name, line, err, c.stderr)
		}
		return nil
	case <-ctx.Done():
		c.stop()
		<-lines // stop closed the pipe
		return fmt.Errorf("%s: not ready: %w; stderr: %s", c.name, ctx.Err(), c.stderr)
	}
}

// stop interrupts the peer (SIGINT, which cvm and the Node scripts take
// as SIGTERM), kills it if it has not exited 5 s later, and returns once
// it is gone.
func (c *child) stop() {
	c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// startNode starts a script of interop/js in Node, in interop/, where the
// pinned packages are.
func startNode(root, script string, env ...string) (*child, error) {
	return startChild(script, filepath.Join(root, "interop"), "node", append(os.Environ(), env...), filepath.Join(root, "interop", "js", script))
}

// runNode runs a script of interop/js in Node to its end and decodes the
// one JSON object it prints into out. The script's exit status is left to
// the caller, which reads the error the object reports.
func runNode(ctx context.Context, root, script string, out any, env ...string) error {
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "interop", "js", script))
	cmd.Dir = filepath.Join(root, "interop")
	cmd.Env = append(os.Environ(), env...)
	stderr := &tail{max: 8 << 10}
	cmd.Stderr = stderr
	stdout, err := cmd.Output()
	if jerr := json.Unmarshal(stdout, out); jerr != nil {
		return fmt.Errorf("%s: %v, output %q (%v); stderr: %s", script, err, firstLine(string(stdout)), jerr, stderr)
	}
	return nil
}
