//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"golang.org/x/sys/unix"
)

// openPTY returns the controller side of a new pseudo-terminal and its
// terminal device.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	return ptmx, tty
}

// terminal is "cvm room chat" running in a pseudo-terminal: lines holds
// everything it writes there, stdout and stderr alike, until it exits.
type terminal struct {
	*proc
	ptmx  *os.File // what is typed is written here
	lines <-chan string
}

func chatInTerminal(t *testing.T, c *cli, args ...string) *terminal {
	t.Helper()
	ptmx, tty := openPTY(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.env["HOME"], "XDG_CONFIG_HOME=" + c.env["XDG_CONFIG_HOME"]}
	p := cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: env, Terminal: tty,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true}}, append([]string{"room", "chat"}, args...)...)
	tty.Close() // the child has its own copy
	return &terminal{proc: p, ptmx: ptmx, lines: readLines(t, ptmx)}
}

// expect reads the terminal until a line contains want.
func (term *terminal) expect(t *testing.T, want string) {
	t.Helper()
	expectLine(t, term.lines, want, func() string { return "" })
}

// exited waits for the chat to exit 0 and returns what it wrote after
// the last line read.
func (term *terminal) exited(t *testing.T, what string) []string {
	t.Helper()
	if code := term.Wait(t); code != 0 {
		t.Fatalf("exit %d after %s", code, what)
	}
	var rest []string
	for line := range term.lines { // ends when the terminal has no writer left
		rest = append(rest, line)
	}
	return rest
}

// "cvm room chat" in a terminal, as a person uses it: typed lines are
// echoed by the terminal, others' messages and results appear as they come,
// and Ctrl-D leaves.
func TestRoomChat_InATerminal(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	gw.ReadyLine(t, &ready)

	carol := chatInTerminal(t, c, "--gateway", ready.REST, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "carol", "--kind", "human"))
	carol.expect(t, "* joined room:x as carol; nobody else is here")

	dave := startPiped(t, c, "room", "chat", "--gateway", ready.REST, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "dave"))
	dave.expect(t, "here: carol")
	carol.expect(t, "* dave joined")
	dave.say(t, "hi carol")
	carol.expect(t, "<dave> hi carol")

	fmt.Fprint(carol.ptmx, "hello dave\n")
	carol.expect(t, "hello dave") // the terminal's echo of what carol typed
	dave.expect(t, "<carol> hello dave")
	fmt.Fprint(carol.ptmx, "/who\n")
	carol.expect(t, "* dave (dave, agent)")

	fmt.Fprint(carol.ptmx, "\x04") // Ctrl-D: end of input
	carol.exited(t, "Ctrl-D")
	dave.expect(t, "* carol left (closed)")
}

// /quit leaves quietly: nothing after it on the terminal says the
// connection was lost or is being re-established (the client used to
// report its own close as a disconnection, on stdout and in the log).
func TestRoomChat_QuitInATerminal(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	gw.ReadyLine(t, &ready)
	dave := startPiped(t, c, "room", "chat", "--gateway", ready.REST, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "dave"))
	dave.expect(t, "* joined room:x as dave")
	// The race between leaving and the read loop is lost only sometimes:
	// several rounds make a regression show.
	for i := range 5 {
		carol := chatInTerminal(t, c, "--gateway", ready.REST, "--topic", "room:x",
			"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "carol", "--kind", "human"))
		carol.expect(t, "* joined room:x as carol; here: dave")
		fmt.Fprint(carol.ptmx, "/quit\n")
		carol.expect(t, "/quit") // the terminal's echo
		rest := carol.exited(t, "/quit")
		for _, line := range rest {
			if strings.Contains(line, "disconnected") || strings.Contains(line, "reconnect") {
				t.Fatalf("round %d: after /quit the terminal showed %q", i, rest)
			}
		}
		dave.expect(t, "* carol left (closed)")
	}
}
