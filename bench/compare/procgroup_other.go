//go:build !unix

package main

import "os/exec"

// ownProcessGroup does nothing where there are no process groups: a
// cancelled command is killed alone (exec.CommandContext's default).
func ownProcessGroup(cmd *exec.Cmd) {}
