// Package browsertest drives the system Chromium from tests of cvm's web
// pages, through chromedp: one browser per test package, a fresh browser
// context (own cookies and storage) per simulated person, waits on page
// conditions (never sleeps), and screenshots of each step.
//
// Without a Chromium the tests skip, saying how to enable them; with
// CVM_REQUIRE_BROWSER=1 (set by .ci/run) a missing browser fails them.
// CVM_CHROMIUM names the executable when it is not on PATH as chromium,
// chromium-browser or google-chrome. Screenshots go to $CVM_SCREENSHOTS,
// default the git-ignored screenshots/ at the module root.
//
// Files: browsertest.go (the browser, people, waits, screenshots),
// checks.go (accessibility and keyboard checks), headless.go (Chromium's
// command line, as screenshot tools run it).
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Timeout bounds each wait on a page condition; generous, as the machine
// running the tests may be busy.
const Timeout = 60 * time.Second

// Browser is one Chromium shared by a test package's tests, started on
// first use. Close it from TestMain after m.Run.
type Browser struct {
	mu      sync.Mutex
	started bool
	err     error
	exec    string
	cancels []context.CancelFunc
	browser context.Context
}

// FindChromium returns the Chromium executable, or "" when there is none.
func FindChromium() string {
	if p := os.Getenv("CVM_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// start launches the browser once; later calls return the first result.
func (b *Browser) start() (context.Context, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return b.browser, b.err
	}
	b.started = true
	b.exec = FindChromium()
	if b.exec == "" {
		b.err = errNoBrowser
		return nil, b.err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(b.exec), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	b.cancels = append(b.cancels, cancelAlloc, cancel)
	// The first Run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		b.err = fmt.Errorf("starting %s: %w", b.exec, err)
		return nil, b.err
	}
	b.browser = ctx
	return ctx, nil
}

var errNoBrowser = errors.New("no Chromium found")

// skipWithoutBrowser skips t, or fails it under CVM_REQUIRE_BROWSER=1,
// saying how to run it.
func skipWithoutBrowser(t testing.TB) {
	t.Helper()
	msg := "no Chromium found: install it (apt-get install chromium) or set CVM_CHROMIUM to run the browser tests"
	if os.Getenv("CVM_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (CVM_REQUIRE_BROWSER=1 requires them)")
	}
	t.Skip(msg + "; CVM_REQUIRE_BROWSER=1 makes this a failure")
}

// Close stops the browser, if it was started.
func (b *Browser) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.cancels) - 1; i >= 0; i-- {
		b.cancels[i]()
	}
	b.cancels = nil
}

// Person is one person's browser: a browser context of its own (cookies,
// storage, cache) with one tab, and what its pages logged.
type Person struct {
	t    testing.TB
	Ctx  context.Context
	Name string

	mu   sync.Mutex
	logs []string // console messages and uncaught exceptions
}

// Person opens a new browser context with a tab sized width×height. It
// skips the test (or fails it under CVM_REQUIRE_BROWSER=1) when there is no
// browser. The tab closes when the test ends.
func (b *Browser) Person(t testing.TB, name string, width, height int64) *Person {
	t.Helper()
	parent, err := b.start()
	if errors.Is(err, errNoBrowser) {
		skipWithoutBrowser(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	p := &Person{t: t, Ctx: ctx, Name: name}
	listenErr := chromedp.Listen(ctx, func(ev any) {
		var line string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			line = "console." + string(e.Type) + ": " + strings.Join(parts, " ")
		case *runtime.EventExceptionThrown:
			line = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				line += " " + e.ExceptionDetails.Exception.Description
			}
		default:
			return
		}
		p.mu.Lock()
		p.logs = append(p.logs, line)
		p.mu.Unlock()
	})
	if listenErr != nil {
		cancel()
		t.Fatal(listenErr)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return p
}

// Logs returns what the person's pages logged so far.
func (p *Person) Logs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}

// Do runs actions with a Timeout, failing the test (with a screenshot)
// when one fails.
func (p *Person) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.Shot("failed-" + what)
		p.t.Fatalf("%s: %s: %v; page logs: %q", p.Name, what, err, p.Logs())
	}
}

// WaitFor waits until the JavaScript expression cond is truthy.
func (p *Person) WaitFor(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(Timeout))); err != nil {
		p.Shot("failed-" + what)
		body, _ := chromedp.Run(p.Ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		p.t.Fatalf("%s: waiting for %s (%s): %v\npage text: %s\npage logs: %q", p.Name, what, cond, err, body, p.Logs())
	}
}

// Eval evaluates expr and decodes its value into T.
func Eval[T any](p *Person, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: evaluating %s: %v", p.Name, expr, err)
	}
	return v
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Shot saves a screenshot of the person's viewport as
// TESTNAME-PERSON-name.png in the screenshots folder.
func (p *Person) Shot(name string) {
	p.t.Helper()
	dir := ScreenshotDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Logf("screenshots: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(dir, unsafeName.ReplaceAllString(p.t.Name()+"-"+p.Name+"-"+name, "_")+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
	}
}

// ScreenshotDir is $CVM_SCREENSHOTS, else screenshots/ at the root of the
// module the test runs in.
func ScreenshotDir() string {
	if d := os.Getenv("CVM_SCREENSHOTS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return "screenshots"
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "screenshots")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "screenshots")
		}
	}
}
