package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cvmgo/cvm/internal/cvmtest"
)

func TestDemo(t *testing.T) {
	c := newCLI(t)
	code, out, errOut := c.run("demo")
	if code != 0 {
		t.Fatalf("demo: code %d, stderr %s", code, errOut)
	}
	// Each step's line: its number and name, its latency and its detail.
	steps := regexp.MustCompile(`(?m)^ +(\d+)\. (\S+) +(.*\d ms.*)$`).FindAllStringSubmatch(out, -1)
	want := []struct{ name, detail string }{
		{"relay", "embedded relay on ws://127.0.0.1:"},
		{"gateway", "encryption required"},
		{"connect", "cvm-demo 1.0.0, MCP 2025-11-25"},
		{"tools", "add, caller, count, echo, time, word_count"},
		{"call", `add {"a":2,"b":3} → {"sum":5}`},
		{"price", "word_count costs 21 sats (its cap tag); client budget 30 sats a day"},
		{"invoice", "payment_required: 21 sats, lnbcrt210n1"},
		{"pay", `paid, payment_accepted; word_count → {"characters":23,"lines":1,"words":5}`},
		{"balances", "client 100 → 79 sats, server 0 → 21 sats (simulated wallets)"},
		{"refused", "word_count again: over the 30-sat daily budget (-32017 over-daily), unpaid"},
		{"shutdown", "client, gateway and relay stopped"},
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps with their latency, want %d:\n%s", len(steps), len(want), out)
	}
	for i, w := range want {
		if s := steps[i]; s[1] != fmt.Sprint(i+1) || s[2] != w.name || !strings.Contains(s[3], w.detail) {
			t.Errorf("step %d: %q; want %s and %q", i+1, s[0], w.name, w.detail)
		}
	}
	// The latency column stays in line, whatever the length of the rows.
	col := -1
	for _, s := range steps {
		at := utf8.RuneCountInString(s[0][:strings.Index(s[0], " ms")])
		if col >= 0 && at != col {
			t.Errorf("the latency column moves (rune %d, then %d):\n%s", col, at, out)
			break
		}
		col = at
	}
	if !strings.Contains(out, "cvm gateway --price tool:NAME=SATS --wallet-file FILE") {
		t.Errorf("demo output lacks what to do next:\n%s", out)
	}
}

// The README's quick start, as a user runs it (built binary, fresh HOME,
// an empty working directory): it ends in seconds and writes nothing.
func TestDemo_Binary(t *testing.T) {
	c := newCLI(t)
	wd := t.TempDir()
	code, out, errOut := cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: []string{"HOME=" + c.env["HOME"], "PATH=/usr/bin:/bin"}, Dir: wd}, "demo", "--json")
	if code != 0 {
		t.Fatalf("cvm demo --json: exit %d\n%s%s", code, out, errOut)
	}
	var res struct {
		OK    bool
		Steps []struct {
			Step string
			Ms   float64
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || len(res.Steps) != 11 || res.Steps[10].Step != "shutdown" {
		t.Fatalf("demo --json: %s", out)
	}
	for _, dir := range []string{c.env["HOME"], wd} {
		var files []string
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
		if len(files) != 0 {
			t.Errorf("cvm demo wrote %v", files)
		}
	}
}
