package did

import (
	"fmt"
	"strings"

	"github.com/cvmgo/cvm/nostrx"
)

// Principal returns the canonical name of whoever s names, so that one
// allow-list serves Nostr and HTTP: a Nostr key (npub or 64 hex) and
// did:nostr:<hex> all become did:nostr:<lowercase hex>; any other DID is
// returned as parsed. Compare principals, never the strings people write.
func Principal(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "did:") {
		d, err := Parse(s)
		if err != nil {
			return "", err
		}
		if d.Method == "nostr" {
			pk, err := nostrx.ParsePublicKey(d.ID)
			if err != nil {
				return "", fmt.Errorf("%w: %s: %v", ErrInvalid, abbreviate(s), err)
			}
			return NostrDID(pk.Key), nil
		}
		return d.String(), nil
	}
	pk, err := nostrx.ParsePublicKey(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q is neither a DID nor a Nostr public key (npub or hex)", ErrInvalid, abbreviate(s))
	}
	return NostrDID(pk.Key), nil
}
