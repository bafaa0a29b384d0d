package social

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Limits Check puts on a profile about to be published: what clients show
// comfortably, far inside what ParseProfile reads.
const (
	maxProfileLine  = 200
	maxProfileAbout = 8 << 10
)

// Check refuses a profile this side should not publish: overlong fields,
// picture, banner and website that are not http(s) URLs, and nip05 and
// lud16 that are not name@domain.
func (p Profile) Check() error {
	var errs []error
	for name, v := range map[string]string{"name": p.Name, "display_name": p.DisplayName, "picture": p.Picture,
		"banner": p.Banner, "website": p.Website, "nip05": p.NIP05, "lud16": p.LUD16} {
		if len(v) > maxProfileLine {
			errs = append(errs, fmt.Errorf("%s: %d bytes, at most %d", name, len(v), maxProfileLine))
		}
	}
	if len(p.About) > maxProfileAbout {
		errs = append(errs, fmt.Errorf("about: %d bytes, at most %d", len(p.About), maxProfileAbout))
	}
	for name, v := range map[string]string{"picture": p.Picture, "banner": p.Banner, "website": p.Website} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want an http(s) URL such as https://example.com/", name, clip(v)))
		}
	}
	for name, v := range map[string]string{"nip05": p.NIP05, "lud16": p.LUD16} {
		if v == "" {
			continue
		}
		if _, _, err := SplitAddress(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	for _, v := range []string{p.Name, p.DisplayName, p.About} {
		if !utf8.ValidString(v) {
			errs = append(errs, errors.New("profile text must be UTF-8"))
			break
		}
	}
	return errors.Join(errs...)
}

// SplitAddress reads name@domain, the form of NIP-05 identifiers and
// lightning addresses: a local part of letters, digits and -_. (NIP-05's
// set) and a host (with a port, for tests on loopback); both lowercased.
func SplitAddress(s string) (name, domain string, err error) {
	name, domain, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "@")
	if !ok || name == "" || domain == "" || len(s) > maxProfileLine {
		return "", "", fmt.Errorf("%q: want name@domain, such as bob@example.com", clip(s))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "", "", fmt.Errorf("%q: the name may have only the characters a-z 0-9 - _ . in it", clip(s))
		}
	}
	if u, err := url.Parse("https://" + domain + "/"); err != nil || u.Host != domain || u.Hostname() == "" || strings.ContainsAny(domain, "/?#@\\ ") {
		return "", "", fmt.Errorf("%q: %q is not a domain name", clip(s), clip(domain))
	}
	return name, domain, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
