package contextvm

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"fiatjaf.com/nostr"
)

// peerCaps is what one side has learned about the other from discovery tags
// (CEP-35). It is replaced, not merged, whenever a message carries discovery
// tags, and reset at each initialize: the reference SDK ORs flags forever, so
// a client that reconnects in persistent-only mode keeps being sent ephemeral
// wraps it no longer listens for.
type peerCaps struct {
	known      bool // some message of this session carried discovery tags
	encryption bool
	ephemeral  bool
	oversized  bool
	openStream bool
	info       ServerInfo
	pmis       []string // CEP-8 payment methods, in the server's order of preference
}

// ServerInfo is the human-facing description a server sends with its first
// message of a session and in its announcement (CEP-6).
type ServerInfo struct {
	Name    string
	About   string
	Website string
	Picture string
}

// discoveryTagNames are the tags that describe a peer rather than route a
// message. "p" and "e" are never among them.
var discoveryTagNames = map[string]bool{
	TagSupportEncryption:          true,
	TagSupportEncryptionEphemeral: true,
	TagSupportOversizedTransfer:   true,
	TagSupportOpenStream:          true,
	TagName:                       true,
	TagAbout:                      true,
	TagWebsite:                    true,
	TagPicture:                    true,
	"pmi":                         true,
	"payment_interaction":         true,
}

// learnCaps reads the discovery tags of a message. ok is false when the
// message carries none, in which case nothing should be learned from it.
func learnCaps(tags nostr.Tags) (caps peerCaps, ok bool) {
	for _, t := range tags {
		if len(t) == 0 || !discoveryTagNames[t[0]] {
			continue
		}
		caps.known = true
		// Flag tags are single-element arrays; the reference accepts only those.
		flag := len(t) == 1
		switch t[0] {
		case TagSupportEncryption:
			caps.encryption = caps.encryption || flag
		case TagSupportEncryptionEphemeral:
			caps.ephemeral = caps.ephemeral || flag
		case TagSupportOversizedTransfer:
			caps.oversized = caps.oversized || flag
		case TagSupportOpenStream:
			caps.openStream = caps.openStream || flag
		case TagName:
			caps.info.Name = tagValue(t)
		case TagAbout:
			caps.info.About = tagValue(t)
		case TagWebsite:
			caps.info.Website = tagValue(t)
		case TagPicture:
			caps.info.Picture = tagValue(t)
		case TagPMI:
			if v := tagValue(t); v != "" && !slices.Contains(caps.pmis, v) {
				caps.pmis = append(caps.pmis, v)
			}
		}
	}
	return caps, caps.known
}

func tagValue(t nostr.Tag) string {
	if len(t) < 2 {
		return ""
	}
	return t[1]
}

// serverDiscoveryTags are the tags a server sends on its first message of a
// session and in its announcement.
func serverDiscoveryTags(info ServerInfo, enc EncryptionMode, wrap GiftWrapMode, oversized, streams bool) nostr.Tags {
	var tags nostr.Tags
	for _, kv := range [][2]string{{TagName, info.Name}, {TagAbout, info.About}, {TagWebsite, info.Website}, {TagPicture, info.Picture}} {
		if kv[1] != "" {
			tags = append(tags, nostr.Tag{kv[0], kv[1]})
		}
	}
	return append(tags, capabilityTags(enc, wrap, oversized, streams)...)
}

// capabilityTags are the support_* flags for these modes.
func capabilityTags(enc EncryptionMode, wrap GiftWrapMode, oversized, streams bool) nostr.Tags {
	var tags nostr.Tags
	if enc != EncryptDisabled {
		tags = append(tags, nostr.Tag{TagSupportEncryption})
	}
	if advertisesEphemeral(enc, wrap) {
		tags = append(tags, nostr.Tag{TagSupportEncryptionEphemeral})
	}
	if oversized {
		tags = append(tags, nostr.Tag{TagSupportOversizedTransfer})
	}
	if streams {
		tags = append(tags, nostr.Tag{TagSupportOpenStream})
	}
	return tags
}

// wrapKindFor picks the gift-wrap kind to send to a peer.
func wrapKindFor(mode GiftWrapMode, peerEphemeral bool, mirror nostr.Kind) nostr.Kind {
	switch {
	case mode == WrapPersistent:
		return KindGiftWrap
	case mode == WrapEphemeral:
		return KindEphemeralGiftWrap
	case peerEphemeral:
		return KindEphemeralGiftWrap
	case mirror == KindEphemeralGiftWrap:
		return KindEphemeralGiftWrap
	default:
		return KindGiftWrap
	}
}

// serverView is what a client knows of its server, under a lock of its own:
// the capabilities the server's discovery tags announced in this session,
// whether this session has sent the client's own discovery tags yet, and
// whether the server reads gift wraps (encryption.go).
type serverView struct {
	mu            sync.Mutex
	caps          peerCaps
	sentDiscovery bool
	// enc is what is known of the server's encryption: given
	// (ClientOptions.KnownEncryption), read in its announcement, then
	// learned from its answers. Kept across sessions.
	enc ServerEncryption
	// heard says which forms the server has answered in on this
	// connection, [0] plaintext and [1] gift-wrapped: it reads them.
	heard  [2]bool
	prices map[string]Price // by capability, from list answers
}

// learnPrices reads the cap tags of the server's answer to a list request
// (CEP-8 puts them on every one), list being the kind of capability it
// lists. A price the server states again replaces the one known; one whose
// amount cannot be read is kept as written, for Price.Validate to refuse.
func (v *serverView) learnPrices(tags nostr.Tags, list string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, t := range tags {
		if len(t) == 0 || t[0] != TagCap {
			continue
		}
		p, err := ReadCapTag(t, list)
		if p.Capability == "" {
			continue
		}
		if old, ok := v.prices[p.Capability]; ok && err != nil && old.Validate() == nil {
			continue // a readable price beats an unreadable one
		}
		if v.prices == nil {
			v.prices = map[string]Price{}
		}
		if len(v.prices) < maxKnownPrices {
			v.prices[p.Capability] = p
		}
	}
}

// maxKnownPrices bounds what a server's answers can make a client keep.
const maxKnownPrices = 10000

// knownPrices returns the prices learned, by capability.
func (v *serverView) knownPrices() []Price {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := slices.Collect(maps.Values(v.prices))
	slices.SortFunc(out, func(a, b Price) int { return strings.Compare(a.Capability, b.Capability) })
	return out
}

// newSession forgets what the previous session learned: the client sent a
// new initialize.
func (v *serverView) newSession() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.caps, v.sentDiscovery = peerCaps{}, false
}

// learn reads the discovery tags of a message from the server, which
// replace what was known: they say whether it reads gift wraps too.
func (v *serverView) learn(tags nostr.Tags) {
	caps, ok := learnCaps(tags)
	if !ok {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.caps = caps
	v.enc = EncryptionUnsupported
	if caps.encryption {
		v.enc = EncryptionSupported
	}
}

// takeDiscovery reports true for the first message of a session, which
// carries the client's discovery tags, and false after.
func (v *serverView) takeDiscovery() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	first := !v.sentDiscovery
	v.sentDiscovery = true
	return first
}

// oversized reports whether the server said it takes CEP-22 transfers.
func (v *serverView) oversized() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.caps.oversized
}

// wrapKind is the gift-wrap kind of the client's next message, 0 for
// plaintext.
func (v *serverView) wrapKind(enc EncryptionMode, wrap GiftWrapMode) nostr.Kind {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case enc == EncryptDisabled, enc == EncryptOptional && v.enc == EncryptionUnsupported:
		return 0
	}
	return wrapKindFor(wrap, v.caps.ephemeral, 0)
}
