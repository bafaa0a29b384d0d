package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// positional is the Args check of every command: it takes from min to max
// positional arguments (max < 0: any number from min). A wrong count is a
// usage error that shows, beside what was wrong, the command's usage
// lines and its first example, so that a person can correct the command
// without reading its help.
func positional(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		n := len(args)
		if n >= min && (max < 0 || n <= max) {
			return nil
		}
		var problem string
		switch {
		case max == 0:
			problem = "takes no arguments, got " + quoted(args)
		case max >= 0 && n > max:
			problem = fmt.Sprintf("takes at most %s, got %d: %s", arguments(max), n, quoted(args))
		case min == max:
			problem = fmt.Sprintf("wants %s, got %s", arguments(min), count(n))
		default:
			problem = fmt.Sprintf("wants at least %s, got %s", arguments(min), count(n))
		}
		return usageError(cmd, problem)
	}
}

func quoted(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

func arguments(n int) string {
	if n == 1 {
		return "1 argument"
	}
	return fmt.Sprintf("%d arguments", n)
}

func count(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

// usageError is problem, said of cmd, followed by its usage lines, its
// first example and where its help is.
func usageError(cmd *cobra.Command, problem string) error {
	var b strings.Builder
	name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	fmt.Fprintf(&b, "%s %s\n", name, problem)
	for i, line := range usageLines(cmd) {
		label := "usage:  "
		if i > 0 {
			label = "        "
		}
		fmt.Fprintf(&b, "%s%s\n", label, line)
	}
	if ex := firstExample(cmd); ex != "" {
		fmt.Fprintf(&b, "example: %s\n", ex)
	}
	fmt.Fprintf(&b, "see: %s --help", cmd.CommandPath())
	return fmt.Errorf("%s", b.String())
}

// usageLines are the forms of cmd's Use, which separates them with
// " | NAME ", each with the path of cmd's parent in front.
func usageLines(cmd *cobra.Command) []string {
	parent := ""
	if cmd.HasParent() {
		parent = cmd.Parent().CommandPath() + " "
	}
	forms := strings.Split(cmd.Use, " | "+cmd.Name()+" ")
	for i := range forms {
		if i > 0 {
			forms[i] = cmd.Name() + " " + forms[i]
		}
		forms[i] = parent + forms[i]
	}
	return forms
}

func firstExample(cmd *cobra.Command) string {
	for _, line := range strings.Split(cmd.Example, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
