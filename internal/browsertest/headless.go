package browsertest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Headless renders url the way screenshot tools run Chromium: from its
// command line, headless, deeming the page ready once budget of virtual
// time has passed (--virtual-time-budget). It returns the DOM then
// (--dump-dom) and a screenshot of a width×height window (--screenshot),
// also saved in the screenshots folder as TESTNAME-name.png.
//
// Virtual time stands still while the page has a request in flight: a
// page that holds one open (a stream) never lets the budget run out, and
// Chromium never answers. Headless fails the test then, after Timeout.
func Headless(t testing.TB, name, url string, budget time.Duration, width, height int) (dom string, png []byte) {
	t.Helper()
	exe := FindChromium()
	if exe == "" {
		skipWithoutBrowser(t)
	}
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	out := run(t, exe, dir, url, budget, "--dump-dom")
	run(t, exe, dir, url, budget, "--screenshot="+shot, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium --screenshot wrote no screenshot: %v", err)
	}
	if err := os.MkdirAll(ScreenshotDir(), 0o755); err == nil {
		os.WriteFile(filepath.Join(ScreenshotDir(), unsafeName.ReplaceAllString(t.Name()+"-"+name, "_")+".png"), png, 0o644)
	}
	return out, png
}

// run runs one headless Chromium on url with a profile of its own in dir,
// and returns its standard output.
func run(t testing.TB, exe, dir, url string, budget time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	all := []string{"--headless", "--disable-gpu", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--virtual-time-budget=" + strconv.FormatInt(budget.Milliseconds(), 10)}
	if os.Geteuid() == 0 {
		all = append(all, "--no-sandbox") // Chromium refuses to run as root with its sandbox
	}
	all = append(append(all, args...), url)
	cmd := exec.CommandContext(ctx, exe, all...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium %s did not finish in %v: the page never let its %v virtual time budget run out (a request it keeps open?)", args[0], Timeout, budget)
	}
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("chromium %s: %v\n%s", args[0], err, stderr)
	}
	return string(out)
}
