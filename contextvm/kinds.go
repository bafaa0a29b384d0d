package contextvm

import "fiatjaf.com/nostr"

// Event kinds of ContextVM.
const (
	// KindMessage carries one JSON-RPC message (or a batch) in its content.
	KindMessage nostr.Kind = 25910
	// KindGiftWrap is a persistent NIP-44 gift wrap around a signed
	// KindMessage event (CEP-4).
	KindGiftWrap nostr.Kind = 1059
	// KindEphemeralGiftWrap is the same wrap in the ephemeral range (CEP-19):
	// relays deliver it and never store it.
	KindEphemeralGiftWrap nostr.Kind = 21059

	// Public announcements (CEP-6), replaceable, never encrypted.
	KindServerAnnouncement    nostr.Kind = 11316
	KindToolsList             nostr.Kind = 11317
	KindResourcesList         nostr.Kind = 11318
	KindResourceTemplatesList nostr.Kind = 11319
	KindPromptsList           nostr.Kind = 11320
	// KindRelayList is the NIP-65 relay list a server publishes (CEP-17).
	KindRelayList nostr.Kind = 10002
)

// ProtocolVersion is the MCP protocol version cvm negotiates by default: the
// newest one the reference TypeScript peers (MCP SDK 1.32) speak. The go-sdk
// also knows 2026-07-28, whose server/discover probe and stateless requests
// those peers do not understand.
const ProtocolVersion = "2025-11-25"

// Tag names that carry discovery and capability information (CEP-6, 19, 22,
// 35, 41). Flag tags are single-element arrays such as ["support_encryption"].
const (
	TagSupportEncryption          = "support_encryption"
	TagSupportEncryptionEphemeral = "support_encryption_ephemeral"
	TagSupportOversizedTransfer   = "support_oversized_transfer"
	TagSupportOpenStream          = "support_open_stream"
	TagName                       = "name"
	TagAbout                      = "about"
	TagWebsite                    = "website"
	TagPicture                    = "picture"
)
