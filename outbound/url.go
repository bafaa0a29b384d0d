package outbound

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
)

// MaxURLLength bounds the URLs a Fetcher takes: no picture or document
// anyone publishes needs a longer one, and it bounds what a stranger can
// make cvm send and log.
const MaxURLLength = 2048

// CheckURL reports, without touching the network, whether f would try to
// fetch raw: an absolute http or https URL of at most MaxURLLength bytes,
// without credentials, whose host, if it is an IP address, is public (or
// on Options.Allow). A name is judged only when it is dialled, by the
// addresses it resolves to, so a nil error does not promise the fetch is
// allowed.
func (f *Fetcher) CheckURL(raw string) error {
	_, err := f.parseURL(raw, false)
	return err
}

func (f *Fetcher) parseURL(raw string, httpsOnly bool) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadURL, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if err := f.checkURL(u, httpsOnly); err != nil {
		return nil, err
	}
	return u, nil
}

// checkURL holds u, the first URL or a redirect's target, to the rules of
// CheckURL.
func (f *Fetcher) checkURL(u *url.URL, httpsOnly bool) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: %q (want http or https)", ErrScheme, u.Scheme)
	case httpsOnly && u.Scheme != "https":
		return fmt.Errorf("%w: %q (want https)", ErrScheme, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("%w: %s", ErrCredentials, u.Redacted())
	case u.Hostname() == "":
		return fmt.Errorf("%w: %q has no host", ErrBadURL, u.Redacted())
	}
	port := uint64(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("%w: port %q", ErrBadURL, p)
		}
		port = n
	}
	// A literal address is refused here already, which saves a dial and
	// lets a caller hide a link it would not follow; names are checked
	// when dialled.
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		return f.checkAddr(netip.AddrPortFrom(ip, uint16(port)))
	}
	return nil
}
