package cvmtest

import (
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/secp"
)

// roleEnv makes the test binary a program the tests below start.
const roleEnv = "CVMTEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "ready":
		// A long-running command: a ready line, then, at SIGTERM, one
		// more line and exit status 3.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		os.Stdout.WriteString(`{"ready":true,"name":"r"}` + "\n")
		<-sig
		os.Stdout.WriteString("bye\n")
		os.Exit(3)
	case "oneshot":
		os.Stdout.WriteString("out " + os.Getenv("X") + "\n")
		os.Stderr.WriteString("err\n")
		os.Exit(4)
	case "lines":
		os.Stdout.WriteString("a\nb")
		os.Exit(0)
	case "hang":
		select {}
	}
	var b Build
	Main(m, &b)
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func role(r string) Options { return Options{Env: append(os.Environ(), roleEnv+"="+r)} }

// A long-running command: its ready line is read, SIGTERM stops it, and
// the line it prints as it exits is still there to read afterwards.
func TestProc_ReadyLineStopAndLastLine(t *testing.T) {
	p := Start(t, self(t), role("ready"))
	var ready struct {
		Ready bool
		Name  string
	}
	p.ReadyLine(t, &ready)
	if !ready.Ready || ready.Name != "r" {
		t.Fatalf("ready line %+v", ready)
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	if rest, err := io.ReadAll(p.Stdout); string(rest) != "bye\n" || err != nil {
		t.Fatalf("after the exit, stdout %q (%v); want the last line", rest, err)
	}
}

// Line returns each line, then what was printed last without a newline,
// then "" at the end of the output.
func TestProc_Line(t *testing.T) {
	p := Start(t, self(t), role("lines"))
	for _, want := range []string{"a\n", "b", ""} {
		if got := p.Line(t); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
}

// The test's end kills what it started and waits for it.
func TestProc_KilledWithTheTest(t *testing.T) {
	var p *Proc
	t.Run("start", func(t *testing.T) { p = Start(t, self(t), role("hang")) })
	select {
	case <-p.Done():
	default:
		t.Fatal("the process outlived its test")
	}
	if code := p.ExitCode(); code != -1 {
		t.Fatalf("exit code %d, want -1 (killed)", code)
	}
}

// Terminate kills a program that ignores the signal once grace is over.
func TestProc_TerminateKillsAfterGrace(t *testing.T) {
	p := Start(t, self(t), role("hang"))
	start := time.Now()
	p.Terminate(syscall.SIGCONT, 10*time.Millisecond) // SIGCONT ends nothing
	if p.ExitCode() != -1 || time.Since(start) > time.Minute {
		t.Fatalf("exit code %d after %v", p.ExitCode(), time.Since(start))
	}
}

func TestRun(t *testing.T) {
	o := role("oneshot")
	o.Env = append(o.Env, "X=42")
	o.Dir = t.TempDir()
	code, out, errOut := Run(t, self(t), o)
	if code != 4 || out != "out 42\n" || errOut != "err\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Build compiles a main package once, with this test binary's crypto
// backend, and Remove deletes it.
func TestBuild(t *testing.T) {
	var b Build
	const pkg = "github.com/cvmgo/cvm/internal/cvmtest/testdata/hello"
	path := b.Path(t, pkg)
	if again := b.Path(t, pkg); again != path {
		t.Fatalf("built twice: %s, %s", path, again)
	}
	if _, out, _ := Run(t, path, Options{}); out != "hello "+secp.Backend+"\n" {
		t.Fatalf("the command printed %q; want the crypto backend %s", out, secp.Backend)
	}
	if err := b.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) || !strings.Contains(path, "cvmtest-") {
		t.Fatalf("%s after Remove: %v", path, err)
	}
}
