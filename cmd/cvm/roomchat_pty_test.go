//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// "cvm room chat" in a terminal, as a person uses it: typed lines are
// echoed by the terminal, others' messages and results appear as they come,
// and Ctrl-D leaves.
func TestRoomChat_InATerminal(t *testing.T) {
	c := newCLI(t)
	data := filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, "room", "serve", "--listen", "127.0.0.1:0", "--data", data)
	var ready roomReady
	gw.readyLine(t, &ready)

	ptmx, tty := openPTY(t)
	cmd := exec.Command(cvmBinary, "room", "chat", "--gateway", ready.REST, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "carol", "--kind", "human"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.env["HOME"], "XDG_CONFIG_HOME=" + c.env["XDG_CONFIG_HOME"]}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	tty.Close() // the child has its own copy

	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		var seen []string
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("terminal closed without %q; saw %q", want, seen)
				}
				if strings.Contains(line, want) {
					return
				}
				seen = append(seen, line)
			case <-deadline:
				t.Fatalf("no %q on the terminal; saw %q", want, seen)
			}
		}
	}
	expect("* joined room:x as carol; nobody else is here")

	dave := startPiped(t, c, "room", "chat", "--gateway", ready.REST, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "dave"))
	dave.expect(t, "here: carol")
	expect("* dave joined")
	dave.say(t, "hi carol")
	expect("<dave> hi carol")

	fmt.Fprint(ptmx, "hello dave\n")
	expect("hello dave") // the terminal's echo of what carol typed
	dave.expect(t, "<carol> hello dave")
	fmt.Fprint(ptmx, "/who\n")
	expect("* dave (dave, agent)")

	fmt.Fprint(ptmx, "\x04") // Ctrl-D: end of input
	select {
	case <-done:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("exit %d after Ctrl-D", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Ctrl-D did not end the chat")
	}
	dave.expect(t, "* carol left (closed)")
}
