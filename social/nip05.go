package social

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/outbound"
)

// NIP-05 maps name@domain to a key: https://domain/.well-known/nostr.json
// ?name=name answers {"names":{name:hex},"relays":{hex:[urls]}}. The
// domain is whoever wrote the name, so the document is fetched through an
// outbound.Fetcher: public addresses only, https only, no redirects (the
// NIP forbids them: the domain must answer itself), bounded in size and
// time.

var (
	// ErrNIP05NotFound: the domain's document does not name the name.
	ErrNIP05NotFound = errors.New("social: NIP-05 name not found")
	// ErrNIP05Mismatch: the name resolves, but to another key than the
	// profile's.
	ErrNIP05Mismatch = errors.New("social: NIP-05 name points to another key")
)

// maxNIP05Bytes bounds the document: a domain may serve every name in one
// static file, but 256 KiB is thousands of names.
const maxNIP05Bytes = 256 << 10

// maxNIP05Relays bounds the relay hints taken from the document.
const maxNIP05Relays = 8

// NIP05 is a resolved name.
type NIP05 struct {
	Key    nostr.PubKey
	Relays []string // as the document gives them, at most maxNIP05Relays
}

// ResolveNIP05 resolves addr (name@domain) through f.
func ResolveNIP05(ctx context.Context, f *outbound.Fetcher, addr string) (NIP05, error) {
	name, domain, err := SplitAddress(addr)
	if err != nil {
		return NIP05{}, fmt.Errorf("social: NIP-05 %w", err)
	}
	var doc struct {
		Names  map[string]string   `json:"names"`
		Relays map[string][]string `json:"relays"`
	}
	u := "https://" + domain + "/.well-known/nostr.json?name=" + url.QueryEscape(name)
	if err := f.GetJSON(ctx, outbound.Request{URL: u, HTTPSOnly: true, MaxBytes: maxNIP05Bytes}, &doc); err != nil {
		return NIP05{}, fmt.Errorf("social: NIP-05 %s: %w", addr, err)
	}
	hexKey, ok := doc.Names[name]
	if !ok {
		return NIP05{}, fmt.Errorf("%w: %s does not list %q", ErrNIP05NotFound, domain, name)
	}
	var n NIP05
	if n.Key, err = parsePubKey(hexKey); err != nil {
		return NIP05{}, fmt.Errorf("%w: %s names %q with a key that is %v", ErrMalformed, domain, name, err)
	}
	relays := doc.Relays[hexKey]
	n.Relays = relays[:min(len(relays), maxNIP05Relays)]
	return n, nil
}

// VerifyNIP05 checks that addr resolves to key: only then may a profile's
// nip05 be shown as the key's name.
func VerifyNIP05(ctx context.Context, f *outbound.Fetcher, addr string, key nostr.PubKey) error {
	n, err := ResolveNIP05(ctx, f, addr)
	if err != nil {
		return err
	}
	if n.Key != key {
		return fmt.Errorf("%w: %s is %s", ErrNIP05Mismatch, addr, n.Key.Hex()[:12])
	}
	return nil
}
