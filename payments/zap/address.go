package zap

import (
	"fmt"
	"net/url"
	"strings"
)

// Address is a Lightning address, NAME@HOST (LUD-16); HOST may carry a
// port (NAME@127.0.0.1:8443), as the reference SDK allows.
type Address struct {
	Name, Host string
}

// maxAddress bounds a Lightning address: a name and a DNS host.
const maxAddress = 320

// ParseAddress reads NAME@HOST. The name is LUD-16's: lower-case letters,
// digits, '-', '_' and '.'.
func ParseAddress(s string) (Address, error) {
	name, host, ok := strings.Cut(strings.TrimSpace(s), "@")
	switch {
	case len(s) > maxAddress:
		return Address{}, fmt.Errorf("%w: longer than %d bytes", ErrAddress, maxAddress)
	case !ok || name == "" || host == "" || strings.Contains(host, "@"):
		return Address{}, fmt.Errorf("%w: %q; want NAME@HOST, e.g. alice@getalby.com", ErrAddress, s)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return Address{}, fmt.Errorf("%w: %q: a name has lower-case letters, digits, '-', '_' and '.'", ErrAddress, s)
		}
	}
	u, err := url.Parse("https://" + host + "/")
	if err != nil || u.Host != host || u.Hostname() == "" || u.User != nil {
		return Address{}, fmt.Errorf("%w: %q: %q is not a host", ErrAddress, s, host)
	}
	return Address{Name: name, Host: strings.ToLower(host)}, nil
}

// String is NAME@HOST.
func (a Address) String() string { return a.Name + "@" + a.Host }

// URL is where the address's LNURL-pay parameters are:
// https://HOST/.well-known/lnurlp/NAME.
func (a Address) URL() string { return "https://" + a.Host + "/.well-known/lnurlp/" + a.Name }
