package main

import (
	"strings"
	"testing"
)

// FuzzParseArguments: any command line reads as arguments or is refused
// with a reason, and what reads types without a schema, one value per key.
func FuzzParseArguments(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, "{bad", "a=1\x00b=x", "a=1\x00a=2", "=1", "a", `a=[1,2]`, `t={"k":"v"}`, ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		c, err := parseArguments(args)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a reason")
			}
			return
		}
		got, err := c.typed(nil)
		if err != nil {
			t.Fatalf("%q read but does not type without a schema: %v", args, err)
		}
		if c.object == nil && len(got) != len(args) {
			t.Fatalf("%q: %d values", args, len(got))
		}
	})
}
