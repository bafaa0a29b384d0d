//go:build unix

package mcpmux

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd lead a process group of its own, which also keeps a
// terminal's Ctrl-C, sent to the foreground group, from reaching it behind
// the back of the process that started it: that one stops it, in order.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

// signalGroup sends sig to every process of the group pid leads (0 sends
// nothing); false when no process is left in it.
func signalGroup(pid int, sig syscall.Signal) bool {
	return syscall.Kill(-pid, sig) == nil
}
