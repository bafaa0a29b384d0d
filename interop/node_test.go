package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// requireNodeModules fails (not skips) when the pinned Node packages are
// missing: these tests are the interop proof, and a skip would hide that.
func requireNodeModules(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH; the interop tests need Node 20 or later")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "nostr-tools")); err != nil {
		t.Fatal("interop/node_modules is missing; run: make interop-deps")
	}
}

// runScript runs a script from js/ with the given environment, waits for it
// to exit and decodes the one JSON object it prints.
func runScript(t *testing.T, timeout time.Duration, script string, env map[string]string, out any) {
	t.Helper()
	requireNodeModules(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("js", script))
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s: %v; output %q; stderr %s", script, runErr, stdout.String(), stderr.String())
	}
	if runErr != nil {
		t.Logf("%s exited: %v; stderr: %s", script, runErr, stderr.String())
	}
}
