// Package docs holds the project's documentation pages; its tests keep
// them true: the README's two commands, its length, and the links between
// pages.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README gives the command that runs the main job and the one that runs
// every test, exactly, and CI runs the second.
func TestREADME_TheTwoCommands(t *testing.T) {
	readme := read(t, "../README.md")
	for _, cmd := range []string{"go run ./cmd/cvm demo", "make test"} {
		if !regexp.MustCompile(`(?m)^    ` + regexp.QuoteMeta(cmd) + `$`).MatchString(readme) {
			t.Errorf("the README does not give %q as a command line of its own", cmd)
		}
	}
	if ci := read(t, "../.ci/run"); !regexp.MustCompile(`(?m)^make test$`).MatchString(ci) {
		t.Errorf(".ci/run does not run the README's test command, make test")
	}
}

// The README reads in five minutes; the rest lives in docs/.
func TestREADME_IsShort(t *testing.T) {
	if n := strings.Count(read(t, "../README.md"), "\n"); n >= 200 {
		t.Errorf("README.md has %d lines; keep it under 200 and move details to docs/", n)
	}
}

// Every relative link of the README and the docs pages names a file that
// exists.
func TestLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob("*.md")
	pages = append(pages, "../README.md")
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, page := range pages {
		for _, m := range link.FindAllStringSubmatch(read(t, page), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
			}
		}
	}
}
