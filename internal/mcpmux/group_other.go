//go:build !unix

package mcpmux

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup does nothing where there are no process groups: the child is
// stopped alone.
func ownGroup(*exec.Cmd) {}

// signalGroup kills the process pid for SIGTERM and SIGKILL alike (there
// are no signals to send it); false when it cannot be found.
func signalGroup(pid int, sig syscall.Signal) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	defer p.Release()
	if sig == 0 {
		return false // it cannot be asked; the caller waited for it already
	}
	return p.Kill() == nil
}
