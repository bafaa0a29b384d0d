package main

import (
	"encoding/json"
	"os/exec"
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
		"4. tools", "add, caller, count, echo, time, word_count", `5. call      add {"a":2,"b":3} → {"sum":5}`, "6. shutdown"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, " ms\n") != 6 {
		t.Errorf("every step should show its latency:\n%s", out)
	}
}

// The README's quick start, as a user runs it (built binary, fresh HOME).
func TestDemo_Binary(t *testing.T) {
	c := newCLI(t)
	cmd := exec.Command(cvmBinary, "demo", "--json")
	cmd.Env = []string{"HOME=" + c.env["HOME"], "PATH=/usr/bin:/bin"}
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
	if err := json.Unmarshal(out, &res); err != nil || !res.OK || len(res.Steps) != 6 || res.Steps[5].Step != "shutdown" {
		t.Fatalf("demo --json: %s", out)
	}
}
