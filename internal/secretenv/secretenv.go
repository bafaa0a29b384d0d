package secretenv

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// The variables cvm reads secrets from.
const (
	// SecretKey holds a Nostr secret key (nsec or hex): the identity of
	// whatever command reads it.
	SecretKey = "CVM_SECRET_KEY"
	// Wallet holds a wallet connection URI (NIP-47 or the test
	// simulator's), which can make invoices and, if it allows, pay them.
	Wallet = "CVM_WALLET"
)

// Names returns the variables cvm reads secrets from, a fresh slice.
func Names() []string { return []string{SecretKey, Wallet} }

// IsSecret reports whether name is one of Names. Names are compared as the
// system compares them: without regard to case on Windows.
func IsSecret(name string) bool {
	return slices.ContainsFunc(Names(), func(s string) bool { return sameName(s, name) })
}

// CheckPass checks the names an operator asked to pass to children
// (--pass-env): each must be one of Names, since every other variable
// passes anyway and a misspelt one would silently pass nothing.
func CheckPass(names []string) error {
	for _, n := range names {
		if !IsSecret(n) {
			return fmt.Errorf("--pass-env %q: only %s are kept from the processes cvm starts (every other variable reaches them anyway); name one of those", n, strings.Join(Names(), " and "))
		}
	}
	return nil
}

// Strip returns environ (KEY=VALUE entries, as os.Environ gives them)
// without the variables of Names, except those named in pass. environ is
// not modified.
func Strip(environ, pass []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if IsSecret(name) && !slices.ContainsFunc(pass, func(p string) bool { return sameName(p, name) }) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func sameName(a, b string) bool {
	if runtime.GOOS == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}
