package did

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid is returned for a string that is not a DID (or DID URL)
	// this package can read.
	ErrInvalid = errors.New("did: invalid DID")
	// ErrUnsupportedMethod is returned by resolvers for a DID whose method
	// they do not resolve.
	ErrUnsupportedMethod = errors.New("did: unsupported DID method")
	// ErrNotFound is returned by resolvers when a DID of a method they
	// resolve has no document: a did:web host that does not answer, a
	// did:key that does not decode to a known key.
	ErrNotFound = errors.New("did: DID could not be resolved")
)

// maxDID bounds the DIDs Parse accepts. did:web with a long path is the
// longest in use; anything past this is an attack on the parser or cache.
const maxDID = 2048

// DID is a parsed decentralized identifier: did:<Method>:<ID>.
type DID struct {
	// Method is the method name: lowercase letters and digits.
	Method string
	// ID is the method-specific identifier, as written (percent-escapes
	// included).
	ID string
}

// String returns the DID as written: did:<Method>:<ID>.
func (d DID) String() string { return "did:" + d.Method + ":" + d.ID }

// Parse reads a DID per DID Core §3.1. A DID URL's fragment, query or path
// is refused: pass SplitURL's DID part for those.
func Parse(s string) (DID, error) {
	if len(s) > maxDID {
		return DID{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, maxDID)
	}
	rest, ok := strings.CutPrefix(s, "did:")
	if !ok {
		return DID{}, fmt.Errorf("%w: %q does not start with \"did:\"", ErrInvalid, abbreviate(s))
	}
	method, id, ok := strings.Cut(rest, ":")
	if !ok || method == "" {
		return DID{}, fmt.Errorf("%w: %q has no method", ErrInvalid, abbreviate(s))
	}
	for i := 0; i < len(method); i++ {
		c := method[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return DID{}, fmt.Errorf("%w: method %q is not lowercase letters and digits", ErrInvalid, abbreviate(method))
		}
	}
	if id == "" || strings.HasSuffix(id, ":") {
		return DID{}, fmt.Errorf("%w: %q has an empty method-specific id", ErrInvalid, abbreviate(s))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_', c == ':':
		case c == '%':
			if i+2 >= len(id) || !isHex(id[i+1]) || !isHex(id[i+2]) {
				return DID{}, fmt.Errorf("%w: bad percent-escape in %q", ErrInvalid, abbreviate(s))
			}
			i += 2
		default:
			return DID{}, fmt.Errorf("%w: character %q not allowed in %q", ErrInvalid, c, abbreviate(s))
		}
	}
	return DID{Method: method, ID: id}, nil
}

// SplitURL splits a DID URL (a key id such as did:key:z6Mk…#account-key)
// into its DID and fragment; the fragment is empty when there is none.
func SplitURL(s string) (DID, string, error) {
	base, frag, _ := strings.Cut(s, "#")
	if i := strings.IndexAny(base, "?/"); i >= 0 {
		base = base[:i]
	}
	d, err := Parse(base)
	if err != nil {
		return DID{}, "", err
	}
	return d, frag, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// abbreviate keeps error messages short when the input is long or hostile.
func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
