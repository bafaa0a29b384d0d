package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUsage_MissingArgumentsShowUsageAndExample: a command given too few
// or too many arguments says so, then shows how it is used and an example,
// instead of Cobra's "requires at least 2 arg(s)".
func TestUsage_MissingArgumentsShowUsageAndExample(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"call"}, []string{"cvm: call wants at least 2 arguments, got none\n", "\nusage:  cvm call SERVER TOOL [JSON | key=value…]\n",
			"\n        cvm call --schema HASH TOOL [JSON | key=value…]\n", "\nexample: cvm call npub1… add a=2 b=3\n", "\nsee: cvm call --help\n"}},
		{[]string{"call", "npub1x"}, []string{"call wants at least 2 arguments, got 1\n"}},
		{[]string{"call", "--schema", "7c61"}, []string{"call wants at least 1 argument, got none\n"}},
		{[]string{"tools"}, []string{"cvm: tools wants 1 argument, got none\n", "usage:  cvm tools SERVER\n", "example: cvm tools npub1…\n"}},
		{[]string{"tools", "a", "b"}, []string{`tools takes at most 1 argument, got 2: "a" "b"`}},
		{[]string{"schema", "hash", "a", "b"}, []string{`schema hash takes at most 1 argument, got 2: "a" "b"`, "usage:  cvm schema hash [FILE|-]\n"}},
		{[]string{"discover", "weather"}, []string{`discover takes no arguments, got "weather"`, "usage:  cvm discover\n"}},
		{[]string{"room", "bridge"}, []string{"room bridge wants at least 1 argument, got none", "usage:  cvm room bridge --topic T", "example: cvm room bridge --gateway"}},
	} {
		code, out, errOut := c.run(tc.args...)
		if code != exitLocal || out != "" {
			t.Errorf("%q: code %d, stdout %q", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
		if strings.Contains(errOut, "arg(s)") {
			t.Errorf("%q: Cobra's message: %s", tc.args, errOut)
		}
	}
}

// TestUsage_EveryCommandChecksItsArguments walks the command tree: every
// command that runs checks its arguments with the shared check, and every
// one that takes arguments has an example to show.
func TestUsage_EveryCommandChecksItsArguments(t *testing.T) {
	a := &app{}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		// The gateway's arguments are the upstream command after --,
		// checked with the rest of its upstream (gatewayUpstream).
		if !cmd.Runnable() || cmd.HasSubCommands() || cmd.Name() == "gateway" {
			return
		}
		path := cmd.CommandPath()
		if cmd.Args == nil {
			t.Errorf("%s: no argument check", path)
			return
		}
		many := strings.Fields(strings.Repeat("x ", 50))
		takesArgs := cmd.Args(cmd, []string{"x"}) == nil
		checked := false
		for _, args := range [][]string{nil, many} {
			err := cmd.Args(cmd, args)
			if err == nil {
				continue
			}
			checked = true
			msg := err.Error()
			if !strings.Contains(msg, "\nusage:  "+path) || !strings.HasSuffix(msg, "\nsee: "+path+" --help") {
				t.Errorf("%s with %d arguments: %q", path, len(args), msg)
			}
			if takesArgs && !strings.Contains(msg, "\nexample: cvm ") {
				t.Errorf("%s takes arguments and shows no example: %q", path, msg)
			}
		}
		if !checked {
			t.Errorf("%s accepts none and 50 arguments alike", path)
		}
	}
	walk(a.rootCommand())
}
