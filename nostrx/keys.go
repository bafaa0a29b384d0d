package nostrx

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip19"
)

// ErrInvalidKey is returned, wrapped, for any key that cannot be parsed.
var ErrInvalidKey = errors.New("invalid key")

// PublicKey is a parsed public key together with the relay hints that came
// with it (only an nprofile carries hints).
type PublicKey struct {
	Key    nostr.PubKey
	Relays []string
}

// ParsePublicKey accepts a public key as 64 hex characters, an npub or an
// nprofile, with surrounding whitespace and an optional "nostr:" prefix. The
// key must be a valid point on the curve.
func ParsePublicKey(s string) (PublicKey, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "nostr:")
	switch {
	case s == "":
		return PublicKey{}, fmt.Errorf("%w: empty public key", ErrInvalidKey)
	case strings.HasPrefix(s, "npub1"), strings.HasPrefix(s, "nprofile1"):
		prefix, value, err := nip19.Decode(s)
		if err != nil {
			return PublicKey{}, fmt.Errorf("%w: %s is not a valid bech32 %s: %v", ErrInvalidKey, abbreviate(s), prefix, err)
		}
		var pk PublicKey
		switch v := value.(type) {
		case nostr.PubKey:
			pk.Key = v
		case nostr.ProfilePointer:
			pk.Key, pk.Relays = v.PublicKey, v.Relays
		default:
			return PublicKey{}, fmt.Errorf("%w: %s does not hold a public key", ErrInvalidKey, abbreviate(s))
		}
		if !validPoint(pk.Key) {
			return PublicKey{}, fmt.Errorf("%w: %s is not a point on secp256k1", ErrInvalidKey, abbreviate(s))
		}
		return pk, nil
	case strings.HasPrefix(s, "nsec1"):
		// Refuse loudly: someone pasted a secret where a public key belongs.
		return PublicKey{}, fmt.Errorf("%w: this is a secret key (nsec), not a public key; use the npub or hex public key", ErrInvalidKey)
	case len(s) == 64:
		pk, err := nostr.PubKeyFromHex(strings.ToLower(s))
		if err != nil {
			return PublicKey{}, fmt.Errorf("%w: %s is not a valid hex public key", ErrInvalidKey, abbreviate(s))
		}
		return PublicKey{Key: pk}, nil
	default:
		return PublicKey{}, fmt.Errorf("%w: %s is not a public key: want 64 hex characters, an npub or an nprofile", ErrInvalidKey, abbreviate(s))
	}
}

// ParseSecretKey accepts a secret key as an nsec or 64 hex characters, with
// surrounding whitespace. Errors never include the input.
func ParseSecretKey(s string) (nostr.SecretKey, error) {
	s = strings.TrimSpace(s)
	var sk nostr.SecretKey
	switch {
	case strings.HasPrefix(s, "nsec1"):
		_, value, err := nip19.Decode(s)
		if err != nil {
			return sk, fmt.Errorf("%w: not a valid nsec (bad checksum or encoding)", ErrInvalidKey)
		}
		v, ok := value.(nostr.SecretKey)
		if !ok {
			return sk, fmt.Errorf("%w: nsec does not hold 32 bytes", ErrInvalidKey)
		}
		sk = v
	case len(s) == 64:
		if _, err := hex.Decode(sk[:], []byte(s)); err != nil {
			return sk, fmt.Errorf("%w: secret key is 64 characters but not hex", ErrInvalidKey)
		}
	case strings.HasPrefix(s, "npub1"), strings.HasPrefix(s, "nprofile1"):
		return sk, fmt.Errorf("%w: this is a public key, not a secret key (nsec or 64 hex characters)", ErrInvalidKey)
	default:
		return sk, fmt.Errorf("%w: a secret key is an nsec or 64 hex characters (got %d characters)", ErrInvalidKey, len(s))
	}
	if sk == (nostr.SecretKey{}) || sk.Public() == nostr.ZeroPK {
		return nostr.SecretKey{}, fmt.Errorf("%w: secret key is outside the secp256k1 range", ErrInvalidKey)
	}
	return sk, nil
}

// EncodeNpub returns the bech32 npub form of pk.
func EncodeNpub(pk nostr.PubKey) string { return nip19.EncodeNpub(pk) }

// EncodeNsec returns the bech32 nsec form of sk. Callers write it to key files;
// nothing in cvm prints it.
func EncodeNsec(sk nostr.SecretKey) string { return nip19.EncodeNsec(sk) }

func validPoint(pk nostr.PubKey) bool {
	_, err := nostr.PubKeyFromHex(pk.Hex())
	return err == nil
}

// abbreviate shortens a long user input for an error message, so that a
// message stays one readable line.
func abbreviate(s string) string {
	const max = 24
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q", s[:max-3]+"...")
}
