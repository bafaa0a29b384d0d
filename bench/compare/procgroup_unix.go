//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup runs cmd in a process group of its own and makes
// cancelling its context kill the whole group. bench/mcpxload starts the
// gateway and a baseline hub as children; killing only mcpxload would
// leave them running, loading the machine for every later run. The group
// also keeps a terminal's Ctrl-C from reaching the children directly:
// bench-compare catches it, cancels, and cleans up in order.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
