//go:build unix

package mcpmux

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// openScript runs script with sh as a stdio server whose file descriptor 3
// is the write end of a pipe: every process it starts holds a copy, so the
// read end returned reaches end of file only once all of them are gone,
// zombies included (a zombie holds no files), whoever reaps them.
func openScript(t *testing.T, script string) (mcp.Connection, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd := exec.Command("sh", "-c", script)
	cmd.ExtraFiles = []*os.File{w}
	conn, err := OpenCommand(context.Background(), cmd, nil)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return conn, r
}

// awaitEOF reads r to its end, failing if that takes longer than d.
func awaitEOF(t *testing.T, r *os.File, d time.Duration) string {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("a process the server started is still running after %v: %v", d, err)
	}
	return string(b)
}

func TestOpenCommand_WithholdsSecretVariables(t *testing.T) {
	t.Setenv(secretenv.SecretKey, "nsec-value")
	t.Setenv(secretenv.Wallet, "wallet-value")
	t.Setenv("CVM_TEST_OTHER", "other-value")
	const script = `printf '%s|%s|%s' "$CVM_SECRET_KEY" "$CVM_WALLET" "$CVM_TEST_OTHER" >&3; exec cat`
	conn, out := openScript(t, script)
	conn.Close()
	if got := awaitEOF(t, out, 10*time.Second); got != "||other-value" {
		t.Fatalf("the server saw %q, want no secrets and the rest", got)
	}

	// A command whose environment the caller set gets exactly that.
	r, w, _ := os.Pipe()
	defer r.Close()
	cmd := exec.Command("sh", "-c", script)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(os.Environ(), "CVM_TEST_OTHER=set")
	c, err := OpenCommand(context.Background(), cmd, nil)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := awaitEOF(t, r, 10*time.Second); got != "nsec-value|wallet-value|set" {
		t.Fatalf("the server saw %q, want the environment it was given", got)
	}
}
