package contextvm

import (
	"fmt"
	"strings"

	"fiatjaf.com/nostr"
)

// EncryptionMode says when messages are gift-wrapped (CEP-4).
type EncryptionMode int

const (
	// EncryptOptional is the default. A client encrypts unless it has learned
	// that the server cannot decrypt; a server mirrors each client.
	EncryptOptional EncryptionMode = iota
	// EncryptRequired encrypts everything and refuses plaintext.
	EncryptRequired
	// EncryptDisabled sends plaintext and refuses gift wraps.
	EncryptDisabled
)

func (m EncryptionMode) String() string {
	switch m {
	case EncryptOptional:
		return "optional"
	case EncryptRequired:
		return "required"
	case EncryptDisabled:
		return "disabled"
	}
	return fmt.Sprintf("EncryptionMode(%d)", int(m))
}

// ParseEncryptionMode reads "optional", "required" or "disabled".
func ParseEncryptionMode(s string) (EncryptionMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "optional":
		return EncryptOptional, nil
	case "required":
		return EncryptRequired, nil
	case "disabled":
		return EncryptDisabled, nil
	}
	return 0, fmt.Errorf("encryption mode %q: want optional, required or disabled", s)
}

// GiftWrapMode says which gift-wrap kinds are used and listened for (CEP-19).
type GiftWrapMode int

const (
	// WrapOptional listens for both kinds and sends 21059 once the peer has
	// advertised support for it, 1059 otherwise. The default.
	WrapOptional GiftWrapMode = iota
	// WrapEphemeral uses only 21059.
	WrapEphemeral
	// WrapPersistent uses only 1059.
	WrapPersistent
)

func (m GiftWrapMode) String() string {
	switch m {
	case WrapOptional:
		return "optional"
	case WrapEphemeral:
		return "ephemeral"
	case WrapPersistent:
		return "persistent"
	}
	return fmt.Sprintf("GiftWrapMode(%d)", int(m))
}

// ParseGiftWrapMode reads "optional", "ephemeral" or "persistent".
func ParseGiftWrapMode(s string) (GiftWrapMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "optional":
		return WrapOptional, nil
	case "ephemeral":
		return WrapEphemeral, nil
	case "persistent":
		return WrapPersistent, nil
	}
	return 0, fmt.Errorf("gift-wrap mode %q: want optional, ephemeral or persistent", s)
}

// inboxFilters are what a peer in this mode subscribes to: the events
// addressed to me. Persistent gift wraps (1059), which relays store, are
// asked for from since on, so that a peer starting does not fetch every
// wrap it was ever sent. The ephemeral kinds (25910, 21059), which relays
// never store, are asked for without a since: it would only hide live
// events dated before it, such as a request event published again after
// the server restarted, or one from a peer whose clock is behind, which
// the freshness window accepts (and the replay guard then deals with).
func (m GiftWrapMode) inboxFilters(me nostr.PubKey, since nostr.Timestamp) []nostr.Filter {
	p := nostr.TagMap{"p": {me.Hex()}}
	live := nostr.Filter{Kinds: []nostr.Kind{KindMessage}, Tags: p}
	if m != WrapPersistent {
		live.Kinds = append(live.Kinds, KindEphemeralGiftWrap)
	}
	if m == WrapEphemeral {
		return []nostr.Filter{live}
	}
	return []nostr.Filter{live, {Kinds: []nostr.Kind{KindGiftWrap}, Tags: p, Since: since}}
}

// advertisesEphemeral reports whether a peer in these modes announces
// support_encryption_ephemeral.
func advertisesEphemeral(enc EncryptionMode, wrap GiftWrapMode) bool {
	return enc != EncryptDisabled && wrap != WrapPersistent
}
