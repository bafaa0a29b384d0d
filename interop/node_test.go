package interop

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
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
func runScript(t *testing.T, script string, env map[string]string, out any) {
	t.Helper()
	requireNodeModules(t)
	if code, stderr := runNode(t, ".", filepath.Join("js", script), env, nil, out); code != 0 {
		t.Logf("%s exited %d; stderr: %s", script, code, stderr)
	}
}

// runNode runs a Node script, a path relative to dir, in dir, with the
// test's environment and env, and stdin (if not nil) as its input, to its
// end; it decodes the one JSON object the script prints into out, and
// returns its exit code and stderr. A script that prints no JSON fails t.
func runNode(t *testing.T, dir, script string, env map[string]string, stdin io.Reader, out any) (int, string) {
	t.Helper()
	code, stdout, stderr := cvmtest.Run(t, "node", cvmtest.Options{Env: withEnv(env), Dir: dir, Stdin: stdin}, script)
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("%s: exit %d; output %q (%v); stderr %s", script, code, stdout, err, stderr)
	}
	return code, stderr
}

// withEnv is the test's environment with env added.
func withEnv(env map[string]string) []string {
	out := os.Environ()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
