package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// runCommand runs argv in dir and returns its standard output. On failure
// the error carries the end of both outputs: a test binary reports a
// failed benchmark on stdout, the go command on stderr.
func runCommand(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	out, _, err := runCommandEnv(ctx, dir, nil, argv...)
	return out, err
}

// runCommandEnv is runCommand with extra environment variables; it also
// returns the process's state, for its CPU time.
func runCommandEnv(ctx context.Context, dir string, env []string, argv ...string) ([]byte, *os.ProcessState, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	ownProcessGroup(cmd)
	// A grandchild that keeps the output pipes open must not hang the wait
	// once the process group has been killed.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.Bytes(), cmd.ProcessState, fmt.Errorf("%s: %w%s%s", strings.Join(argv, " "), err,
			indentTail(stdout.String()), indentTail(stderr.String()))
	}
	return stdout.Bytes(), cmd.ProcessState, nil
}

// indentTail returns the last lines of out, indented under an error
// message, or "" if out is empty.
func indentTail(out string) string {
	const maxLines = 15
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	if len(lines) > maxLines {
		lines = append([]string{"…"}, lines[len(lines)-maxLines:]...)
	}
	return "\n\t" + strings.Join(lines, "\n\t")
}
