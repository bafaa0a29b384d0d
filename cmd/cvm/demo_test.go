package main

import (
	"encoding/json"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	c := newCLI(t)
	code, out, errOut := c.run("demo")
	if code != 0 {
		t.Fatalf("demo: code %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"1. relay", "2. gateway", "encryption required", "3. connect", "cvm-demo 1.0.0, MCP 2025-11-25",
		"4. tools", "add, caller, count, echo, time, word_count", `5. call      add {"a":2,"b":3} → {"sum":5}`,
		"6. price     word_count costs 21 sats (its cap tag); client budget 30 sats a day",
		"7. invoice   payment_required: 21 sats, lnbcrt210n1",
		`8. pay       paid, payment_accepted; word_count → {"characters":23,"lines":1,"words":5}`,
		"9. balances  client 100 → 79 sats, server 0 → 21 sats (simulated wallets)",
		"10. refused   word_count again: over the 30-sat daily budget (-32017 over-daily), unpaid",
		"11. shutdown", "cvm gateway --price tool:NAME=SATS --wallet-file FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, " ms\n") != 11 {
		t.Errorf("every step should show its latency:\n%s", out)
	}
}

// The README's quick start, as a user runs it (built binary, fresh HOME,
// an empty working directory): it ends in seconds and writes nothing.
func TestDemo_Binary(t *testing.T) {
	c := newCLI(t)
	cmd := exec.Command(cvmBinary, "demo", "--json")
	cmd.Env = []string{"HOME=" + c.env["HOME"], "PATH=/usr/bin:/bin"}
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cvm demo --json: %v\n%s", err, out)
	}
	var res struct {
		OK    bool
		Steps []struct {
			Step string
			Ms   float64
		}
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.OK || len(res.Steps) != 11 || res.Steps[10].Step != "shutdown" {
		t.Fatalf("demo --json: %s", out)
	}
	for _, dir := range []string{c.env["HOME"], cmd.Dir} {
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
