package nostrx

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ErrBadRelayURL is wrapped by the errors of ParseRelayURL.
var ErrBadRelayURL = errors.New("not a relay URL")

// RelayURLError says why ParseRelayURL refused a URL. It wraps
// ErrBadRelayURL.
type RelayURLError struct {
	URL    string // as given, shortened
	Reason string
}

func (e *RelayURLError) Error() string {
	return fmt.Sprintf("%v: %q: %s", ErrBadRelayURL, e.URL, e.Reason)
}

func (e *RelayURLError) Unwrap() error { return ErrBadRelayURL }

// maxRelayURL bounds a relay URL: real ones are short, and a relay list is
// untrusted input.
const maxRelayURL = 512

// ParseRelayURL checks that s is a websocket URL a pool can dial (ws:// or
// wss://, a host, a port in range if any, no user info, no query or
// fragment) and returns it in the form NormalizeRelayURL gives: scheme and
// host in lower case, no trailing slash. It does not add a missing scheme:
// call NormalizeRelayURL first for URLs typed by a person.
func ParseRelayURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (string, error) {
		return "", &RelayURLError{URL: clip(s), Reason: why}
	}
	if len(s) > maxRelayURL {
		return bad(fmt.Sprintf("longer than %d bytes", maxRelayURL))
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("does not parse as a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "ws" && scheme != "wss":
		return bad("want ws:// or wss://, as in wss://relay.example")
	case u.Opaque != "" || u.Host == "":
		return bad("no host")
	case u.User != nil:
		return bad("user info is not allowed")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return bad("a query or fragment is not allowed")
	case u.Hostname() == "":
		return bad("no host")
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("port out of range")
		}
	}
	u.Scheme, u.Host = scheme, strings.ToLower(u.Host)
	return strings.TrimRight(u.String(), "/"), nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Scope is how close a relay's host is to this machine. What a server's
// relay list may point a client to depends on where the list was read: a
// list read from a public relay that names a private address would make the
// client connect into its own network at a stranger's word.
type Scope int

const (
	// ScopePublic is any host not known to be local.
	ScopePublic Scope = iota
	// ScopePrivate is a private, shared (CGNAT), link-local or unspecified
	// address, or a name that only a local network resolves: a single label
	// ("relay"), or one under .local, .lan, .internal or .home.arpa.
	ScopePrivate
	// ScopeLoopback is this machine: a loopback address, localhost or a
	// name under .localhost.
	ScopeLoopback
)

func (s Scope) String() string {
	switch s {
	case ScopeLoopback:
		return "loopback"
	case ScopePrivate:
		return "private"
	}
	return "public"
}

// cgnat is the shared address space of RFC 6598: not routed on the
// internet, used by carriers and by overlay networks.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// RelayScope classifies the host of a relay URL (as ParseRelayURL returns
// it). Names are classified as written, never resolved: resolving would
// cost a lookup and still be open to a name that changes its answer.
func RelayScope(relayURL string) Scope {
	u, err := url.Parse(relayURL)
	if err != nil {
		return ScopePublic
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if addr, err := netip.ParseAddr(host); err == nil {
		addr = addr.Unmap()
		switch {
		case addr.IsLoopback():
			return ScopeLoopback
		case addr.IsPrivate(), addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast(),
			addr.IsMulticast(), addr.IsUnspecified(), addr.Zone() != "", cgnat.Contains(addr):
			return ScopePrivate
		}
		return ScopePublic
	}
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return ScopeLoopback
	case !strings.Contains(host, "."):
		return ScopePrivate
	}
	for _, suffix := range []string{".local", ".lan", ".internal", ".home.arpa"} {
		if strings.HasSuffix(host, suffix) {
			return ScopePrivate
		}
	}
	return ScopePublic
}
